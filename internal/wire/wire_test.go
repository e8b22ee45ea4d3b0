package wire

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingBody counts what is read of it; with stall, a Read blocks until
// Close, as net/http's bodies do when the server stops sending.
type countingBody struct {
	r      io.Reader
	read   atomic.Int64
	closed chan struct{}
	stall  bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.stall {
		<-b.closed
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

func newBody(size int, stall bool) *countingBody {
	return &countingBody{r: strings.NewReader(strings.Repeat("x", size)), closed: make(chan struct{}), stall: stall}
}

func TestDiscard(t *testing.T) {
	for _, tt := range []struct {
		name     string
		size     int
		declared int64
		stall    bool
		wantRead int64
	}{
		{"short, known", 100, 100, false, 100},
		{"short, unknown", 100, -1, false, 100},
		{"at the limit", DrainLimit, DrainLimit, false, DrainLimit},
		{"known to be long: unread", 10 << 10, 10 << 10, false, 0},
		{"unknown and long: read to the limit", 10 << 10, -1, false, DrainLimit + 1},
		{"stalls: closed under the read", 0, 1000, true, 0},
	} {
		b := newBody(tt.size, tt.stall)
		Discard(&http.Response{Body: b, ContentLength: tt.declared})
		if got := b.read.Load(); got != tt.wantRead {
			t.Errorf("%s: read %d bytes, want %d", tt.name, got, tt.wantRead)
		}
		select {
		case <-b.closed:
		default:
			t.Errorf("%s: body left open", tt.name)
		}
	}
	Discard(nil)
	Discard(&http.Response{}) // a nil Body: nothing to do, no panic
}

func TestReadLimited(t *testing.T) {
	data, cut := ReadLimited(io.NopCloser(bytes.NewReader([]byte("hello"))), 10)
	if string(data) != "hello" || cut {
		t.Errorf("short: %q, cut %v", data, cut)
	}
	data, cut = ReadLimited(io.NopCloser(strings.NewReader("hello world")), 5)
	if string(data) != "hello" || !cut {
		t.Errorf("long: %q, cut %v", data, cut)
	}
	b := newBody(0, true)
	if data, cut = ReadLimited(b, 10); len(data) != 0 || !cut {
		t.Errorf("stalled: %q, cut %v", data, cut)
	}
}
