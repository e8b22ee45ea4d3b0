package middleware

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// UnknownLayerError reports a layer name that is not in the stack.
type UnknownLayerError struct {
	Name string
	Have []string // the names the stack does have, outermost first
}

func (e *UnknownLayerError) Error() string {
	if len(e.Have) == 0 {
		return fmt.Sprintf("middleware: no layer named %q (the stack is empty)", e.Name)
	}
	return fmt.Sprintf("middleware: no layer named %q (have %s)", e.Name, strings.Join(e.Have, ", "))
}

// DuplicateLayerError reports a layer name that would appear twice.
type DuplicateLayerError struct{ Name string }

func (e *DuplicateLayerError) Error() string {
	return fmt.Sprintf("middleware: duplicate layer name %q", e.Name)
}

// InvalidLayerError reports a layer that cannot be placed in a stack.
type InvalidLayerError struct {
	Name   string
	Reason string
}

func (e *InvalidLayerError) Error() string {
	return fmt.Sprintf("middleware: invalid layer %q: %s", e.Name, e.Reason)
}

// StatusError is returned by [ErrorForStatus] in place of a response whose
// status is 400 or more. It keeps what a caller needs to report or inspect
// the failure; the response body itself has been read (bounded) and closed.
type StatusError struct {
	// Response is the response, its body replaced by http.NoBody; through
	// its Request, layers below can still be asked about it (for instance
	// engine.ReportOf).
	Response   *http.Response
	StatusCode int
	Status     string      // e.g. "503 Service Unavailable"
	Header     http.Header // the response headers
	Body       []byte      // the start of the body, at most the layer's limit
	Truncated  bool        // Body is not the whole body (over the limit, or the read failed)
}

func (e *StatusError) Error() string {
	return "middleware: unexpected status " + e.Status
}

// TimeoutError reports that one attempt ran past the [Timeout] layer's
// limit, while sending, waiting for headers, or reading the body. It matches
// [context.DeadlineExceeded] with errors.Is, and Timeout reports true, as for
// a net.Error. The caller's own deadline or cancellation is never reported as
// a TimeoutError.
type TimeoutError struct {
	Limit time.Duration
	Err   error // what the transport or body read reported
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("middleware: attempt timed out after %v: %v", e.Limit, e.Err)
}

func (e *TimeoutError) Unwrap() error        { return e.Err }
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true.
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports true, for callers of the deprecated net.Error method.
func (e *TimeoutError) Temporary() bool { return true }
