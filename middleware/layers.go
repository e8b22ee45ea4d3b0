package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/retrystack/retrystack/internal/wire"
)

// defaultStatusBodyLimit is how much of an error response's body
// [ErrorForStatus] keeps when no limit is given.
const defaultStatusBodyLimit = 4 << 10

// ErrorForStatus returns the layer "error-for-status": a response with status
// 400 or more is replaced by a [*StatusError] carrying the status, the headers
// and at most limit bytes of the body (limit <= 0 means 4 KiB); the body is
// then closed.
//
// Placed outermost it sees only the final response, which is the fix for the
// "Ok(503)" trap: a retry layer that gives up hands back its last response,
// and without this layer a caller that checks only err takes it for success.
// Placed inside a retry layer it hides every status from it: nothing is
// retried on status any more.
func ErrorForStatus(limit int64) Layer {
	if limit <= 0 {
		limit = defaultStatusBodyLimit
	}
	return Layer{Name: "error-for-status", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &errorForStatus{next: next, limit: limit}
	}}
}

type errorForStatus struct {
	next  http.RoundTripper
	limit int64
}

func (e *errorForStatus) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := wire.RoundTrip(e.next, req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	return nil, readStatusError(resp, e.limit)
}

// readStatusError reads at most limit bytes of resp's body (limit <= 0
// means defaultStatusBodyLimit), for at most 100 ms so a stalled body
// cannot hold the request, closes it, and returns the *StatusError
// describing resp.
func readStatusError(resp *http.Response, limit int64) *StatusError {
	if limit <= 0 {
		limit = defaultStatusBodyLimit
	}
	body, truncated := wire.ReadLimited(resp.Body, limit)
	resp.Body = http.NoBody
	return &StatusError{
		Response:   resp,
		StatusCode: resp.StatusCode,
		Status:     resp.Status,
		Header:     resp.Header,
		Body:       body,
		Truncated:  truncated,
	}
}

func (e *errorForStatus) CloseIdleConnections() { wire.CloseIdle(e.next) }

// HeaderFunc returns the layer "header", which calls fn for every request
// that passes through it and sets the headers fn returns. Inside a retry
// layer that is once per attempt, so a token or a timestamp can change
// between attempts. An error from fn fails that request, wrapped.
// fn must be safe for concurrent use.
func HeaderFunc(fn func(*http.Request) (http.Header, error)) Layer {
	if fn == nil {
		return Layer{Name: "header", Err: errors.New("nil header function")}
	}
	return Layer{Name: "header", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &header{next: next, fn: fn}
	}}
}

type header struct {
	next http.RoundTripper
	fn   func(*http.Request) (http.Header, error)
}

func (h *header) RoundTrip(req *http.Request) (*http.Response, error) {
	add, err := h.fn(req)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("middleware: header: %w", err)
	}
	if len(add) == 0 {
		return wire.RoundTrip(h.next, req)
	}
	// A shallow copy with its own header map is enough: nothing else changes.
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header, len(add))
	}
	for k, v := range add {
		r.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	return wire.RoundTrip(h.next, &r)
}

func (h *header) CloseIdleConnections() { wire.CloseIdle(h.next) }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
