package telemetry

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The span kinds, as options made once: a slice, so that passing them
// allocates nothing.
var (
	internalKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
)

// method is a request's method as the conventions record it: one of the
// known methods, or _OTHER with the original kept apart, so a caller
// cannot make the metrics' cardinality grow. Methods are case-sensitive:
// "get" is _OTHER.
type method struct {
	name     string // the known method, or "_OTHER"
	original string // the request's method when name is "_OTHER"
}

func methodOf(m string) method {
	switch m {
	case "":
		return method{name: http.MethodGet}
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch, "QUERY":
		return method{name: m}
	}
	return method{name: "_OTHER", original: m}
}

// attrs appends http.request.method and, for _OTHER,
// http.request.method_original.
func (m method) attrs(to []attribute.KeyValue) []attribute.KeyValue {
	to = append(to, semconv.HTTPRequestMethodKey.String(m.name))
	if m.original != "" {
		to = append(to, semconv.HTTPRequestMethodOriginal(m.original))
	}
	return to
}

// spanName is the attempt span's name: the method, or "HTTP" for _OTHER.
func (m method) spanName() string {
	if m.original != "" {
		return "HTTP"
	}
	return m.name
}

// operationName avoids building the common span names per request.
func (m method) operationName() string {
	switch m.spanName() {
	case http.MethodGet:
		return "retrystack GET"
	case http.MethodPost:
		return "retrystack POST"
	case http.MethodPut:
		return "retrystack PUT"
	case http.MethodDelete:
		return "retrystack DELETE"
	case http.MethodHead:
		return "retrystack HEAD"
	}
	return "retrystack " + m.spanName()
}

func errorType(k policy.ErrorKind) attribute.KeyValue {
	if k == policy.ErrorOther {
		return semconv.ErrorTypeOther
	}
	return semconv.ErrorTypeKey.String(k.String())
}

// errorTypeOf names the error an operation ended with: the status of a
// response made into an error, the hop limit, or the transport error's
// kind.
func errorTypeOf(err error) string {
	if xe, ok := errors.AsType[*engine.ExhaustedError](err); ok {
		return strconv.Itoa(xe.Last.StatusCode)
	}
	if se, ok := errors.AsType[*middleware.StatusError](err); ok {
		return strconv.Itoa(se.StatusCode)
	}
	if r, ok := errors.AsType[policy.Refusal](err); ok {
		return string(r.StopReason()) // a layer refused: "circuit-open", one of yours
	}
	if et, ok := errors.AsType[interface {
		error
		ErrorType() string
	}](err); ok {
		return et.ErrorType() // an error that names its own type: a redirect hop limit
	}
	return errorType(policy.KindOf(err)).Value.AsString()
}

func protocolVersion(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 1:
		return "1.1"
	case resp.ProtoMajor == 2:
		return "2"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 0:
		return "1.0"
	case resp.ProtoMajor == 3:
		return "3"
	}
	return strconv.Itoa(resp.ProtoMajor) + "." + strconv.Itoa(resp.ProtoMinor)
}
