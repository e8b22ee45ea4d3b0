package crosslayer

import (
	"errors"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// next's writer keeps what the writers net/http hands a handler can do,
// whatever the header names.
func TestHandlerWriterContract(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"renamed", Config{Signals: Signals{Attempt: "x-attempt", Timeout: "x-timeout", ShouldRetry: "x-should-retry"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rttest.Writer(t, func(next http.Handler) http.Handler { return Handler(next, tt.cfg) })
		})
	}
}

// Each of the 16 sets of optional interfaces comes back exactly, always
// with Unwrap, and with FlushError exactly when with Flush.
func TestWriterKeepsExactlyTheOriginalsInterfaces(t *testing.T) {
	for has := range wire.Pusher << 1 {
		w := (&pushbackWriter{ResponseWriter: httptest.NewRecorder(), st: &inbound.State{}}).writer(has)
		if got := wire.OptionalOf(w); got != has {
			t.Errorf("writer(%04b) implements %04b (bits: Pusher ReaderFrom Hijacker Flusher)", has, got)
		}
		if _, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok {
			t.Errorf("writer(%04b) has no Unwrap", has)
		}
		if _, ok := w.(interface{ FlushError() error }); ok != (has&wire.Flusher != 0) {
			t.Errorf("writer(%04b) has FlushError: %v, want it exactly with Flush", has, ok)
		}
	}
}

// serve serves one GET with Handler(next) on an HTTP/1.1 server, or an h2c
// one, and returns the response and its body. next gets the server's
// writer too; it has returned when serve does.
func serve(t *testing.T, h2 bool, next func(orig, w http.ResponseWriter, r *http.Request)) (*http.Response, string) {
	t.Helper()
	done := make(chan struct{})
	var orig http.ResponseWriter // the server's, set on the handler's goroutine
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next(orig, w, r) }), Config{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		orig = w
		h.ServeHTTP(w, r)
	}))
	c := &http.Client{Transport: &http.Transport{}}
	if h2 {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		c.Transport = tr
	}
	srv.Start()
	defer srv.Close()
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	want := 1
	if h2 {
		want = 2
	}
	if resp.ProtoMajor != want {
		t.Fatalf("the response came over %s, want HTTP/%d", resp.Proto, want)
	}
	return resp, string(body)
}

// Over HTTP/1.1 next can copy a file with sendfile (io.ReaderFrom), flush,
// and hijack the connection.
func TestHandlerWriterHTTP1(t *testing.T) {
	const raw = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked"
	resp, body := serve(t, false, func(_, w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(io.ReaderFrom); !ok {
			t.Errorf("next's writer %T is not an io.ReaderFrom: io.Copy from an *os.File loses sendfile", w)
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Errorf("next's writer %T is not an http.Flusher", w)
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Errorf("next's writer %T is not an http.Hijacker (WebSocket libraries assert it)", w)
			return
		}
		conn, rw, err := hj.Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		if _, err := rw.WriteString(raw); err != nil {
			t.Errorf("writing to the hijacked connection: %v", err)
		} else if err := rw.Flush(); err != nil {
			t.Errorf("flushing the hijacked connection: %v", err)
		}
	})
	if resp.StatusCode != http.StatusOK || body != "hijacked" {
		t.Errorf("the response is %d %q, want what the hijacking handler wrote: 200 %q", resp.StatusCode, body, "hijacked")
	}
}

// Over HTTP/2, where hijacking fails, next's writer is no Hijacker; it
// flushes, and pushes if the server's writer does.
func TestHandlerWriterHTTP2(t *testing.T) {
	serve(t, true, func(orig, w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Hijacker); ok {
			t.Errorf("next's writer %T is an http.Hijacker over HTTP/2, where hijacking fails", w)
		}
		if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("ResponseController.Hijack over HTTP/2: %v, want http.ErrNotSupported", err)
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Errorf("next's writer %T is not an http.Flusher over HTTP/2", w)
		}
		_, want := orig.(http.Pusher)
		if _, ok := w.(http.Pusher); ok != want {
			t.Errorf("next's writer %T is an http.Pusher: %v; the server's %T: %v", w, ok, orig, want)
		}
		_, want = orig.(io.ReaderFrom)
		if _, ok := w.(io.ReaderFrom); ok != want {
			t.Errorf("next's writer %T is an io.ReaderFrom: %v; the server's %T: %v", w, ok, orig, want)
		}
	})
}

// A writer that is only a Flusher, or nothing, stays that.
func TestHandlerWriterWithout(t *testing.T) {
	for _, tt := range []struct {
		name string
		w    http.ResponseWriter
		want wire.Optional
	}{
		{"recorder", httptest.NewRecorder(), wire.Flusher},
		{"bare", bareWriter{httptest.NewRecorder()}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got wire.Optional
			Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = wire.OptionalOf(w)
			}), Config{}).ServeHTTP(tt.w, httptest.NewRequest(http.MethodGet, "/", nil))
			if got != tt.want {
				t.Errorf("next's writer implements %04b, want %04b (bits: Pusher ReaderFrom Hijacker Flusher)", got, tt.want)
			}
		})
	}
}

// bareWriter has none of the optional interfaces.
type bareWriter struct{ rec *httptest.ResponseRecorder }

func (b bareWriter) Header() http.Header         { return b.rec.Header() }
func (b bareWriter) Write(p []byte) (int, error) { return b.rec.Write(p) }
func (b bareWriter) WriteHeader(code int)        { b.rec.WriteHeader(code) }

// readFromRecorder is a recorder with io.ReaderFrom, which counts its calls.
type readFromRecorder struct {
	*httptest.ResponseRecorder
	readFroms int
}

func (r *readFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.readFroms++
	return io.Copy(struct{ io.Writer }{r.ResponseRecorder}, src)
}

// The pushback header goes out with a 503 whose body is copied from a file
// (through the original's ReadFrom, as sendfile needs) or flushed.
func TestHandlerPushbackWriters(t *testing.T) {
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, []byte("overloaded"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		send      func(t *testing.T, w http.ResponseWriter)
		readFroms int
	}{
		{"io.Copy from a file", func(t *testing.T, w http.ResponseWriter) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := io.Copy(w, f); err != nil {
				t.Errorf("io.Copy: %v", err)
			}
		}, 1},
		{"Flush", func(t *testing.T, w http.ResponseWriter) {
			w.(http.Flusher).Flush()
			io.WriteString(w, "overloaded")
		}, 0},
		{"ResponseController.Flush", func(t *testing.T, w http.ResponseWriter) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("ResponseController.Flush: %v", err)
			}
			io.WriteString(w, "overloaded")
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &readFromRecorder{ResponseRecorder: httptest.NewRecorder()}
			Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inbound.From(r.Context()).PushBack() // what a retry layer that gave up does
				w.WriteHeader(http.StatusServiceUnavailable)
				tt.send(t, w)
			}), Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			resp := rec.Result()
			if got := resp.Header.Get(protocol.ShouldRetryHeader); resp.StatusCode != http.StatusServiceUnavailable || got != "false" {
				t.Errorf("status %d, %s %q; want 503, %q", resp.StatusCode, protocol.ShouldRetryHeader, got, "false")
			}
			if got := rec.Body.String(); got != "overloaded" {
				t.Errorf("body %q, want %q", got, "overloaded")
			}
			if rec.readFroms != tt.readFroms {
				t.Errorf("the original's ReadFrom ran %d times, want %d", rec.readFroms, tt.readFroms)
			}
		})
	}
}

// The first byte out, by ReadFrom or by Flush, sends an implicit 200 and
// settles the status: a later pushback and 503 add nothing.
func TestHandlerImplicitStatusWriters(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first func(t *testing.T, w http.ResponseWriter)
	}{
		{"ReadFrom", func(t *testing.T, w http.ResponseWriter) {
			rf, ok := w.(io.ReaderFrom)
			if !ok {
				t.Fatalf("next's writer %T is not an io.ReaderFrom", w)
			}
			rf.ReadFrom(strings.NewReader(""))
		}},
		{"Flush", func(t *testing.T, w http.ResponseWriter) { w.(http.Flusher).Flush() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &readFromRecorder{ResponseRecorder: httptest.NewRecorder()}
			Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.first(t, w)
				inbound.From(r.Context()).PushBack()
				w.WriteHeader(http.StatusServiceUnavailable)
			}), Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if got := rec.Header().Get(protocol.ShouldRetryHeader); rec.Code != http.StatusOK || got != "" {
				t.Errorf("status %d, %s %q; want 200 and no header", rec.Code, protocol.ShouldRetryHeader, got)
			}
		})
	}
}

// http.ResponseController reaches the server's writer through Unwrap for
// what Handler's writer does not implement itself.
func TestHandlerWriterResponseController(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "h2c"} {
		serve(t, proto == "h2c", func(_, w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Errorf("%s: SetWriteDeadline: %v", proto, err)
			}
			if err := rc.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Errorf("%s: SetReadDeadline: %v", proto, err)
			}
			if err := rc.EnableFullDuplex(); err != nil {
				t.Errorf("%s: EnableFullDuplex: %v", proto, err)
			}
			io.WriteString(w, "ok")
		})
	}
}
