// Package rttest checks that a RoundTripper layer obeys the contract every
// retrystack layer promises (DESIGN.md, contract 1). Tests of each layer
// package call [Contract].
package rttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Base is a fake transport that answers every request with Status (200 when
// zero) or fails with Err, closes the request body like a real transport, and
// records what it saw.
type Base struct {
	Status int
	Err    error

	calls, idle atomic.Int32
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
	return &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{"Content-Type": {"text/plain"}},
		Body:       io.NopCloser(bytes.NewReader([]byte("body"))),
		Request:    req,
	}, nil
}

// String names the base in test failures.
func (b *Base) String() string { return fmt.Sprintf("base(status=%d, err=%v)", b.Status, b.Err) }

// CloseIdleConnections records the call.
func (b *Base) CloseIdleConnections() { b.idle.Add(1) }

// Calls is how many requests reached the base.
func (b *Base) Calls() int { return int(b.calls.Load()) }

// trackedBody reports whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// Contract sends requests through wrap(base) for a base that succeeds, one
// that answers 503 and one that fails, and checks that the layer leaves the
// caller's request untouched, never returns a response with an error, closes
// the request body on every path, and forwards CloseIdleConnections.
func Contract(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	for _, base := range []*Base{{}, {Status: http.StatusServiceUnavailable}, {Err: errors.New("rttest: boom")}} {
		rt := wrap(base)
		body := &trackedBody{Reader: bytes.NewReader([]byte("payload"))}
		req, err := http.NewRequest(http.MethodPost, "http://example.test/p?q=1", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Caller", "kept")
		wantHeader, wantURL := req.Header.Clone(), *req.URL

		resp, err := rt.RoundTrip(req)
		if resp != nil && err != nil {
			t.Errorf("%v: got a response together with error %v", base, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		if !body.closed.Load() {
			t.Errorf("%v: request body left open", base)
		}
		if diff := cmp.Diff(wantHeader, req.Header); diff != "" {
			t.Errorf("%v: caller's header modified (-want +got):\n%s", base, diff)
		}
		if diff := cmp.Diff(wantURL, *req.URL, cmp.AllowUnexported(url.URL{})); diff != "" {
			t.Errorf("%v: caller's URL modified (-want +got):\n%s", base, diff)
		}
		if c, ok := rt.(interface{ CloseIdleConnections() }); !ok {
			t.Errorf("layer's RoundTripper %T has no CloseIdleConnections", rt)
		} else if c.CloseIdleConnections(); base.idle.Load() == 0 {
			t.Errorf("CloseIdleConnections did not reach the base")
		}
	}
}
