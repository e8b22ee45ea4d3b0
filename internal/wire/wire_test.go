package wire

import (
	"bytes"
	"errors"
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

// doneCounter records what a Watched body told it.
type doneCounter struct {
	calls []error
	swap  error // what BodyDone returns for a failure; nil: the error itself
}

func (d *doneCounter) BodyDone(err error) error {
	d.calls = append(d.calls, err)
	if err != nil && d.swap != nil {
		return d.swap
	}
	return err
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// A watched body tells its watcher once: at EOF, at Close, or at the first
// failed read, whose error the watcher may replace for every later read;
// a read after Close is the caller's doing, not reported.
func TestWatched(t *testing.T) {
	resp := func(r io.Reader) *http.Response {
		return &http.Response{StatusCode: 200, ContentLength: -1, Body: io.NopCloser(r)}
	}
	t.Run("eof then close", func(t *testing.T) {
		d := &doneCounter{}
		r := resp(strings.NewReader("ok"))
		if !new(Watched[*doneCounter]).Watch(r, d) {
			t.Fatal("not watched")
		}
		io.ReadAll(r.Body)
		r.Body.Close()
		if len(d.calls) != 1 || d.calls[0] != nil {
			t.Errorf("told %v, want one nil", d.calls)
		}
	})
	t.Run("failure replaced and sticky", func(t *testing.T) {
		boom, swapped := errors.New("boom"), errors.New("swapped")
		d := &doneCounter{swap: swapped}
		r := resp(failingReader{boom})
		new(Watched[*doneCounter]).Watch(r, d)
		for range 2 {
			if _, err := r.Body.Read(make([]byte, 1)); err != swapped {
				t.Errorf("read: %v, want the watcher's error", err)
			}
		}
		r.Body.Close()
		if len(d.calls) != 1 || d.calls[0] != boom {
			t.Errorf("told %v, want one boom", d.calls)
		}
	})
	t.Run("read after close", func(t *testing.T) {
		d := &doneCounter{}
		r := resp(failingReader{errors.New("closed")})
		new(Watched[*doneCounter]).Watch(r, d)
		r.Body.Close()
		r.Body.Read(make([]byte, 1))
		if len(d.calls) != 1 || d.calls[0] != nil {
			t.Errorf("told %v, want one nil (the Close)", d.calls)
		}
	})
	t.Run("empty and upgrade left alone", func(t *testing.T) {
		for _, r := range []*http.Response{
			{StatusCode: 204, Body: http.NoBody},
			{StatusCode: 101, Body: io.NopCloser(strings.NewReader(""))},
		} {
			body := r.Body
			if new(Watched[*doneCounter]).Watch(r, &doneCounter{}) || r.Body != body {
				t.Errorf("%d: watched", r.StatusCode)
			}
		}
	})
}
