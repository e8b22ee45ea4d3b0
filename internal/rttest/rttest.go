// Package rttest checks that a RoundTripper layer obeys the contract every
// retrystack layer promises (docs/architecture.md, contract 1). Tests of each layer
// package call [Contract].
package rttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Base is a fake transport that answers every request with Status (200 when
// zero) or fails with Err, closes the request body like a real transport,
// and records what it saw and whether its response bodies were closed.
type Base struct {
	Status int
	Err    error

	calls, idle atomic.Int32
	bodies      []*Body
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
	status := b.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := &Body{Reader: bytes.NewReader([]byte("body"))}
	b.bodies = append(b.bodies, body)
	return &http.Response{
		StatusCode: status,
		Status:     strconv.Itoa(status) + " " + http.StatusText(status),
		Header:     http.Header{"Content-Type": {"text/plain"}},
		Body:       body,
		Request:    req,
	}, nil
}

// String names the base in test failures.
func (b *Base) String() string { return fmt.Sprintf("base(status=%d, err=%v)", b.Status, b.Err) }

// CloseIdleConnections records the call.
func (b *Base) CloseIdleConnections() { b.idle.Add(1) }

// Calls is how many requests reached the base.
func (b *Base) Calls() int { return int(b.calls.Load()) }

// Body is a body that reports whether it was closed.
type Body struct {
	io.Reader
	closed atomic.Bool
}

// Close records the call.
func (b *Body) Close() error { b.closed.Store(true); return nil }

// Closed reports whether Close was called.
func (b *Body) Closed() bool { return b.closed.Load() }

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

// Contract sends requests through wrap(base) for a base that succeeds, one
// that answers 503 and one that fails, and checks that the layer leaves the
// caller's request untouched, returns a response or an error (never both,
// never neither), closes the request body on every path, closes every
// response body it does not hand back, and forwards CloseIdleConnections.
func Contract(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	for _, base := range []*Base{{}, {Status: http.StatusServiceUnavailable}, {Err: errors.New("rttest: boom")}} {
		rt := wrap(base)
		body := &Body{Reader: bytes.NewReader([]byte("payload"))}
		req, err := http.NewRequest(http.MethodPost, "http://example.test/p?q=1", body)
		if err != nil {
			t.Fatal(err)
		}
		req.GetBody = func() (io.ReadCloser, error) { return &Body{Reader: bytes.NewReader([]byte("payload"))}, nil }
		req.Header.Set("X-Caller", "kept")
		before := snap(req)

		resp, err := rt.RoundTrip(req)
		switch {
		case resp != nil && err != nil:
			t.Errorf("%v: got a response together with error %v", base, err)
		case resp == nil && err == nil:
			t.Errorf("%v: got neither a response nor an error", base)
		}
		if resp != nil {
			resp.Body.Close()
		}
		// Closing what was handed back closes what it wraps; the layer
		// closed the rest.
		for _, b := range base.bodies {
			if !b.Closed() {
				t.Errorf("%v: a response body was left open", base)
			}
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
}
