package rttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
	"go.uber.org/goleak"
)

// Writer checks a handler middleware's ResponseWriter wrapper against the
// writers net/http hands a handler: an HTTP/1.1 server's, an HTTP/2 (h2c)
// server's, httptest.ResponseRecorder, and a bare writer with no optional
// interface. For each it serves one request with wrap(inner) and checks
// that inner's writer implements exactly those of http.Flusher,
// http.Hijacker, io.ReaderFrom and http.Pusher that the original writer
// does; that http.ResponseController's Flush returns nil if the original
// is an http.Flusher and http.ErrNotSupported if not, and its
// SetWriteDeadline works exactly when it works on the original (so the
// wrapper has Unwrap); that a status and a body written with io.Copy (from
// a strings.Reader, and from a reader that makes io.Copy use ReadFrom)
// arrive intact; that nothing panics; and that no goroutine is left behind.
//
// Writer counts goroutines: it must not run in parallel with other tests.
func Writer(t *testing.T, wrap func(http.Handler) http.Handler) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	for _, k := range writerKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Helper()
			checkWriter(t, wrap, k)
		})
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left behind once every server was closed: %v", err)
	}
}

// writerKind is a writer net/http hands a handler, and how to send one GET
// through a handler that gets it.
type writerKind struct {
	name  string
	serve func(t *testing.T, h http.Handler) (status int, body string)
}

var writerKinds = []writerKind{
	{"http1", func(t *testing.T, h http.Handler) (int, string) {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close() // also closes srv.Client()'s idle connections
		return get(t, srv.Client(), srv.URL, 1)
	}},
	{"h2c", func(t *testing.T, h http.Handler) (int, string) {
		t.Helper()
		srv := httptest.NewUnstartedServer(h)
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		defer srv.Close()
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		defer tr.CloseIdleConnections()
		return get(t, &http.Client{Transport: tr}, srv.URL, 2)
	}},
	{"recorder", func(t *testing.T, h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		return rec.Code, rec.Body.String()
	}},
	{"bare", func(t *testing.T, h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(bareWriter{rec}, httptest.NewRequest(http.MethodGet, "/", nil))
		return rec.Code, rec.Body.String()
	}},
}

// get sends a GET to url over HTTP/major and returns what came back.
func get(t *testing.T, c *http.Client, url string, major int) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != major {
		t.Fatalf("the response came over %s, want HTTP/%d", resp.Proto, major)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp.StatusCode, string(b)
}

// bareWriter is a ResponseWriter with none of the optional interfaces, as
// some frameworks' writers are.
type bareWriter struct{ rec *httptest.ResponseRecorder }

func (b bareWriter) Header() http.Header         { return b.rec.Header() }
func (b bareWriter) Write(p []byte) (int, error) { return b.rec.Write(p) }
func (b bareWriter) WriteHeader(code int)        { b.rec.WriteHeader(code) }

// writerSeen is what checkWriter's handlers saw.
type writerSeen struct {
	called                      bool // wrap's handler called inner
	panicV                      any
	orig, inner                 wire.Optional
	origType, innerType         string
	origDeadline, innerDeadline error
	copyErr, flushErr           error
}

func checkWriter(t *testing.T, wrap func(http.Handler) http.Handler, k writerKind) {
	t.Helper()
	const status = http.StatusAccepted
	const first, second = "rttest: a body from a strings.Reader, ", "then from a plain io.Reader"
	done := make(chan writerSeen, 1)
	var s writerSeen // the handler's; the test reads what done carries
	inner := wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.inner, s.innerType = wire.OptionalOf(w), fmt.Sprintf("%T", w)
		rc := http.NewResponseController(w)
		s.innerDeadline = rc.SetWriteDeadline(time.Now().Add(hangLimit))
		w.WriteHeader(status)
		// A strings.Reader is an io.WriterTo, which io.Copy prefers; the
		// plain reader leaves it w's ReadFrom, when w has one.
		if _, s.copyErr = io.Copy(w, strings.NewReader(first)); s.copyErr == nil {
			_, s.copyErr = io.Copy(w, struct{ io.Reader }{strings.NewReader(second)})
		}
		s.flushErr = rc.Flush()
	}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			s.panicV = recover()
			done <- s
		}()
		s.orig, s.origType = wire.OptionalOf(w), fmt.Sprintf("%T", w)
		// The zero time is no deadline, which these servers have anyway.
		s.origDeadline = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		inner.ServeHTTP(w, r)
	})
	gotStatus, gotBody := k.serve(t, h)
	select {
	case s = <-done:
	case <-time.After(hangLimit):
		t.Fatalf("the handler was still running %v after the response", hangLimit)
	}

	if s.panicV != nil {
		t.Fatalf("the handler panicked: %v", s.panicV)
	}
	if !s.called {
		t.Fatalf("wrap's handler did not call the handler it wraps")
	}
	if s.inner != s.orig {
		t.Errorf("the wrapped handler's writer %s implements %v; the original %s implements %v", s.innerType, s.inner, s.origType, s.orig)
	}
	if s.orig&wire.Flusher != 0 && s.flushErr != nil {
		t.Errorf("ResponseController.Flush on %s: %v; the original %s can flush", s.innerType, s.flushErr, s.origType)
	}
	if s.orig&wire.Flusher == 0 && !errors.Is(s.flushErr, http.ErrNotSupported) {
		t.Errorf("ResponseController.Flush on %s: %v, want http.ErrNotSupported: the original %s cannot flush", s.innerType, s.flushErr, s.origType)
	}
	if (s.innerDeadline == nil) != (s.origDeadline == nil) {
		t.Errorf("ResponseController.SetWriteDeadline on %s: %v; on the original %s: %v (Unwrap missing?)", s.innerType, s.innerDeadline, s.origType, s.origDeadline)
	}
	if s.copyErr != nil {
		t.Errorf("io.Copy to %s: %v", s.innerType, s.copyErr)
	}
	if gotStatus != status || gotBody != first+second {
		t.Errorf("the response is %d %q, want %d %q", gotStatus, gotBody, status, first+second)
	}
}
