package middleware

import (
	"fmt"
	"net/http"
)

// LayerError reports a stack that cannot be built or edited as asked: an
// invalid layer, a name used twice, or a name the stack does not have.
type LayerError struct {
	Name   string // the layer's name
	Reason string // what is wrong with it, e.g. "duplicate name"; Err's text when Err is set
	Err    error  // the layer's own Layer.Err when that is what is wrong (a *policy.ConfigError); nil otherwise
}

func (e *LayerError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("middleware: layer %q: %v", e.Name, e.Err) // as it reads now: a caller may have renamed its field (the path from its own Config)
	}
	return fmt.Sprintf("middleware: layer %q: %s", e.Name, e.Reason)
}

// Unwrap returns the layer's own error (Layer.Err), such as a
// *policy.ConfigError naming the field at fault; nil otherwise.
func (e *LayerError) Unwrap() error { return e.Err }

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
