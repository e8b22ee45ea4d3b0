package telemetry

import (
	"errors"
	"net/http"
	"runtime/debug"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scopeName is the instrumentation scope of every span and instrument.
const scopeName = "github.com/retrystack/retrystack/telemetry"

// Attribute keys of retrystack's own span attributes, events and
// metrics, and the attempt span's event.
const (
	AttrAttempts   = attribute.Key("retrystack.attempts")    // sends of an operation
	AttrStopReason = attribute.Key(protocol.AttrStopReason)  // policy.StopReason
	AttrDelay      = attribute.Key(protocol.AttrDelay)       // planned wait, in seconds
	AttrDelaySrc   = attribute.Key(protocol.AttrDelaySource) // "policy" or "retry-after"
	AttrReason     = attribute.Key(protocol.AttrReason)      // the retries metric: Decision.Cause
	AttrPitfall    = attribute.Key(protocol.AttrPitfall)     // the pitfall's name
	AttrCookies    = attribute.Key(protocol.AttrCookies)     // cookie-lost: names, never values
	AttrLayer      = attribute.Key(protocol.AttrLayer)       // which nested retry level: "http" or "stream"
	AttrReplayed   = attribute.Key("retrystack.replayed")    // the answer is the server's stored one (engine.Report.Replayed)
	// AttrTimeLeft and AttrCallerAttempt are the cross-layer protocol's
	// (package crosslayer): the time left the attempt told the server, in
	// ms; the attempt of the caller's that the operation serves, when a
	// crosslayer.Handler said it is a retry.
	AttrTimeLeft      = attribute.Key("retrystack.deadline.time_left_ms")
	AttrCallerAttempt = attribute.Key("retrystack.caller.attempt")
	// AttrHedge marks an attempt span that is a hedge (package hedge):
	// 1 for the first hedge of a send.
	AttrHedge = attribute.Key(protocol.AttrHedge)
	// AttrBreakerKey and AttrBreakerState are the circuit and the state it
	// entered, on the breaker metric.
	AttrBreakerKey   = attribute.Key(protocol.AttrBreakerKey)
	AttrBreakerState = attribute.Key("retrystack.breaker.state")

	// EventTransparent is the event of an attempt span for each send the
	// transport made on its own (the layers' events are
	// middleware.EventRetry and the others).
	EventTransparent = "retrystack.transparent_attempt"
)

// Config injects the providers, and the options otelhttp users know (a
// span name, a filter, attributes of your own; docs/telemetry.md sets them
// beside otelhttp's). Nil fields use the global providers (otel's defaults
// are no-ops); a nil Propagator is the global one when the application has
// set one by the time New runs (as otelhttp uses it), W3C TraceContext
// otherwise. The zero Config traces and measures every request.
type Config struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator

	// SpanName names a request's operation span, as otelhttp's
	// WithSpanNameFormatter does; nil: "retrystack {method}" ("retrystack
	// HTTP" for an unknown method). It is given the caller's request as it
	// enters the stack. Keep the names few (a route, never a URL): tools
	// group spans by name. The attempt spans keep the conventions' names
	// ("{method}"). Called on the request's goroutine; it must be safe for
	// concurrent use.
	SpanName func(req *http.Request) string
	// Filter picks the requests to trace and measure, as otelhttp's
	// WithFilter does; nil: all of them. A request it returns false for
	// gets no operation span, no attempt spans, no trace context in its
	// headers, and is left out of every metric (its retries still
	// happen). It is asked once per operation, with the caller's request,
	// by the operation layer; the attempt layer asks it itself only when
	// it runs without one. It must be safe for concurrent use.
	Filter func(req *http.Request) bool
	// Attributes returns attributes of your own for a request, as
	// otelhttp's Labeler and WithMetricAttributesFn give: they are set on
	// its operation span when it starts (a sampler sees them) and added to
	// its measurements (retrystack.client.operation.duration and .resends,
	// and http.client.request.duration of each attempt). nil: none. They
	// become metric dimensions: keep their values few (a tenant, a route,
	// never an ID). Asked once per operation, with the caller's request;
	// it must be safe for concurrent use, and must not change a slice it
	// returned.
	Attributes func(req *http.Request) []attribute.KeyValue
}

// Telemetry holds the tracer, the propagator and the instruments. It is
// safe for concurrent use; one serves a whole client.
type Telemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	spanName   func(*http.Request) string
	filter     func(*http.Request) bool
	attributes func(*http.Request) []attribute.KeyValue
	untraced   *untraced // the mark of an operation Filter left out

	instruments
}

// New returns a Telemetry for cfg, or the error of creating an instrument.
func New(cfg Config) (*Telemetry, error) {
	tp, mp, prop := cfg.TracerProvider, cfg.MeterProvider, cfg.Propagator
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
		if len(prop.Fields()) == 0 { // the global default, which injects nothing
			prop = propagation.TraceContext{}
		}
	}
	v := version()
	m := mp.Meter(scopeName, metric.WithInstrumentationVersion(v))
	t := &Telemetry{tracer: tp.Tracer(scopeName, trace.WithInstrumentationVersion(v)), prop: prop,
		spanName: cfg.SpanName, filter: cfg.Filter, attributes: cfg.Attributes}
	t.untraced = &untraced{t: t}
	var err error
	if t.instruments, err = newInstruments(m); err != nil {
		return nil, err
	}
	return t, nil
}

// version is the module's version as the build knows it, for the
// instrumentation scope: "v1.2.3" in a program that depends on it,
// "(devel)" in this repository.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == modulePath {
			return bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				return d.Version
			}
		}
	}
	return ""
}

const modulePath = "github.com/retrystack/retrystack"

// notMadeByNew is why a Telemetry that New did not make has no layers.
const notMadeByNew = "a Telemetry must be made by telemetry.New"

// Tracer returns the tracer the layers use, for spans around them.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Operation returns the layer "telemetry": the logical operation's span
// and metrics. Put it outermost, so redirect hops fall inside it.
func (t *Telemetry) Operation() middleware.Layer {
	if t.tracer == nil {
		return middleware.Layer{Name: "telemetry", Err: errors.New(notMadeByNew)}
	}
	return middleware.Layer{Name: "telemetry", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &operationLayer{t: t, next: wire.Base(next)}
	}}
}

// Attempt returns the layer "attempt-telemetry": one CLIENT span and one
// http.client.request.duration measurement per physical attempt, and the
// trace context injected into it. Put it innermost, just above the
// transport.
func (t *Telemetry) Attempt() middleware.Layer {
	if t.tracer == nil {
		return middleware.Layer{Name: "attempt-telemetry", Err: errors.New(notMadeByNew)}
	}
	return middleware.Layer{Name: "attempt-telemetry", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &attemptLayer{t: t, next: wire.Base(next)}
	}}
}
