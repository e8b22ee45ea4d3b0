// Package rttest checks that a RoundTripper layer obeys the contract every
// retrystack layer promises (docs/architecture.md, contract 1). Tests of each layer
// package call [Contract]. It also holds the pieces several packages'
// tests drive the real transport with: a server and transport over
// HTTP/1.1 or h2c ([Server]), an upload held in a read ([GatedBody]), a
// response whose release a test waits on ([CloseHook]), and a pooled
// connection whose end arrives when the test says ([HeldEnd]).
package rttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Base is a fake transport that answers every request with Status (200 when
// zero) or fails with Err, closes the request body like a real transport,
// and records what it saw and whether its response bodies were closed. Its
// other fields make it misbehave the ways transports in the field do.
type Base struct {
	Status int
	Err    error
	// Location is the answer's Location header, for a 3xx.
	Location string
	// NilBody answers with a nil Body, as mocks in users' tests do.
	NilBody bool
	// NilResponse answers (nil, nil).
	NilResponse bool
	// AlsoErr returns the response together with this error.
	AlsoErr error
	// Stall answers with a body of unknown length whose Read blocks until
	// the body is closed.
	Stall bool
	// Upgrade answers 101 Switching Protocols with a body that is the
	// connection, as net/http's Transport does.
	Upgrade bool

	method      string // the method Contract sends, for its messages
	calls, idle atomic.Int32
	mu          sync.Mutex
	bodies      []Closer
}

// Closer is a response body that reports whether it was closed.
type Closer interface {
	io.ReadCloser
	Closed() bool
}

// RoundTrip implements http.RoundTripper.
func (b *Base) RoundTrip(req *http.Request) (*http.Response, error) {
	b.calls.Add(1)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	if b.Err != nil {
		return nil, b.Err
	}
	if b.NilResponse {
		return nil, nil
	}
	status := b.Status
	switch {
	case b.Upgrade:
		status = http.StatusSwitchingProtocols
	case status == 0:
		status = http.StatusOK
	}
	resp := &http.Response{
		StatusCode:    status,
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		Header:        http.Header{"Content-Type": {"text/plain"}},
		ContentLength: 4,
		Request:       req,
	}
	if b.Location != "" {
		resp.Header.Set("Location", b.Location)
	}
	var body Closer
	switch {
	case b.NilBody:
		resp.ContentLength = 0
	case b.Stall:
		resp.ContentLength = -1
		body = &StallBody{closed: make(chan struct{})}
	case b.Upgrade:
		resp.ContentLength = -1
		resp.Header = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"test"}}
		body = &Conn{Body: Body{Reader: bytes.NewReader(nil)}}
	default:
		body = &Body{Reader: bytes.NewReader([]byte("body"))}
	}
	if body != nil {
		resp.Body = body
		b.mu.Lock()
		b.bodies = append(b.bodies, body)
		b.mu.Unlock()
	}
	return resp, b.AlsoErr
}

// String names the base in test failures.
func (b *Base) String() string {
	s := fmt.Sprintf("base(status=%d", b.Status)
	if b.method != "" {
		s = b.method + " " + s
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{b.Err != nil, "err"}, {b.Location != "", "location"}, {b.NilBody, "nil body"}, {b.NilResponse, "nil response"},
		{b.AlsoErr != nil, "response and error"}, {b.Stall, "stalled body"}, {b.Upgrade, "101 upgrade"}} {
		if f.on {
			s += ", " + f.name
		}
	}
	return s + ")"
}

// CloseIdleConnections records the call.
func (b *Base) CloseIdleConnections() { b.idle.Add(1) }

// Calls is how many requests reached the base.
func (b *Base) Calls() int { return int(b.calls.Load()) }

func (b *Base) openBodies() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, body := range b.bodies {
		if !body.Closed() {
			n++
		}
	}
	return n
}

// Body is a body that reports whether it was closed.
type Body struct {
	io.Reader
	closed atomic.Bool
}

// Close records the call.
func (b *Body) Close() error { b.closed.Store(true); return nil }

// Closed reports whether Close was called.
func (b *Body) Closed() bool { return b.closed.Load() }

// Conn is the body of a 101 response: the connection, which can be written.
type Conn struct {
	Body
	written atomic.Int64
}

// Write implements io.Writer.
func (c *Conn) Write(p []byte) (int, error) { c.written.Add(int64(len(p))); return len(p), nil }

// StallBody is a body that sends nothing: Read blocks until Close, as a
// server that stalls mid-body makes net/http's bodies do.
type StallBody struct {
	once   sync.Once
	closed chan struct{}
}

// Read blocks until the body is closed.
func (b *StallBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("rttest: read on closed body")
}

// Close unblocks the reads; it may be called while one is blocked.
func (b *StallBody) Close() error { b.once.Do(func() { close(b.closed) }); return nil }

// Closed reports whether Close was called.
func (b *StallBody) Closed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// snapshot is what a layer must leave as it was in the caller's request.
type snapshot struct {
	Method, Host, Proto string
	URL                 url.URL
	Header              http.Header
	ContentLength       int64
	Close               bool
}

func snap(r *http.Request) snapshot {
	return snapshot{r.Method, r.Host, r.Proto, *r.URL, r.Header.Clone(), r.ContentLength, r.Close}
}

// Contract sends requests through wrap(base) for bases that succeed,
// answer 503, fail, answer without a Body, answer (nil, nil), answer with a
// response and an error, stall in a discarded body, and upgrade the
// connection, and checks that the layer leaves the caller's request
// untouched, returns a response or an error (never both, never neither, a
// response always with a Body), never panics, never hangs on a body nobody
// reads, hands a 101's connection back writable and never sends it twice,
// closes the request body on every path, closes every response body it
// does not hand back, and forwards CloseIdleConnections.
func Contract(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	bases := func() []*Base {
		return []*Base{
			{}, {Status: http.StatusServiceUnavailable}, {Err: errors.New("rttest: boom")},
			{NilBody: true}, {Status: http.StatusServiceUnavailable, NilBody: true}, {NilResponse: true},
			{AlsoErr: errors.New("rttest: response and error")},
			{Status: http.StatusServiceUnavailable, Stall: true}, {Status: http.StatusFound, Location: "/next", Stall: true},
			{Upgrade: true},
		}
	}
	// POST is not idempotent, PUT is: retry layers resend only the
	// second, so both paths run. An upgrade is a GET.
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		for _, base := range bases() {
			if base.Upgrade {
				if method != http.MethodPost {
					continue
				}
				method = http.MethodGet
			}
			checkOne(t, wrap, base, method)
		}
	}
}

// hangLimit is how long Contract waits for a RoundTrip before it calls it
// hung: far beyond anything a layer may take, so it never fails a slow
// machine, and far below a stalled body's forever.
const hangLimit = 20 * time.Second

func checkOne(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper, base *Base, method string) {
	t.Helper()
	base.method = method
	rt := wrap(base)
	body := &Body{Reader: bytes.NewReader([]byte("payload"))}
	req, err := http.NewRequest(method, "http://example.test/p?q=1", body)
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = func() (io.ReadCloser, error) { return &Body{Reader: bytes.NewReader([]byte("payload"))}, nil }
	req.Header.Set("X-Caller", "kept")
	if base.Upgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "test")
	}
	before := snap(req)

	type result struct {
		resp   *http.Response
		err    error
		panicV any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panicV = recover()
			done <- r
		}()
		r.resp, r.err = rt.RoundTrip(req)
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(hangLimit):
		t.Fatalf("%v: RoundTrip still running after %v", base, hangLimit)
	}
	resp, err := r.resp, r.err
	switch {
	case r.panicV != nil:
		t.Errorf("%v: RoundTrip panicked: %v", base, r.panicV)
	case resp != nil && err != nil:
		t.Errorf("%v: got a response together with error %v", base, err)
	case resp == nil && err == nil:
		t.Errorf("%v: got neither a response nor an error", base)
	case resp != nil && resp.Body == nil:
		t.Errorf("%v: got a response with a nil Body", base)
	}
	if base.Upgrade && resp != nil { // a layer that fails every request has nothing to hand back
		if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
			t.Errorf("%v: the 101's body is a %T, not the io.ReadWriteCloser the base returned", base, resp.Body)
		}
		if c, ok := resp.Body.(Closer); ok && c.Closed() {
			t.Errorf("%v: the 101's connection was closed before the caller had it", base)
		}
	}
	if n := base.Calls(); base.Upgrade && n > 1 {
		t.Errorf("%v: an upgrade was sent %d times", base, n)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	// Closing what was handed back closes what it wraps; the layer
	// closed the rest.
	if n := base.openBodies(); n > 0 {
		t.Errorf("%v: %d response bodies left open", base, n)
	}
	if !body.Closed() {
		t.Errorf("%v: request body left open", base)
	}
	if diff := cmp.Diff(before, snap(req), cmp.AllowUnexported(url.URL{})); diff != "" {
		t.Errorf("%v: caller's request modified (-want +got):\n%s", base, diff)
	}
	if c, ok := rt.(interface{ CloseIdleConnections() }); !ok {
		t.Errorf("layer's RoundTripper %T has no CloseIdleConnections", rt)
	} else if c.CloseIdleConnections(); base.idle.Load() == 0 {
		t.Errorf("CloseIdleConnections did not reach the base")
	}
}
