package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/events"
	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
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

	reqDuration httpconv.ClientRequestDuration
	opDuration  metric.Float64Histogram
	resends     metric.Int64Histogram
	delay       metric.Float64Histogram
	retries     metric.Int64Counter
	pitfalls    metric.Int64Counter
	circuits    metric.Int64Counter
	throttled   metric.Int64Counter
	paced       metric.Int64Counter
	limited     metric.Int64Counter
	injected    metric.Int64Counter
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
	var errs [11]error
	t.reqDuration, errs[0] = httpconv.NewClientRequestDuration(m)
	t.opDuration, errs[1] = m.Float64Histogram("retrystack.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of logical operations: every attempt, wait and redirect hop, and the read of the final body."),
		metric.WithExplicitBucketBoundaries(operationBuckets...))
	t.resends, errs[2] = m.Int64Histogram("retrystack.client.operation.resends", metric.WithUnit("{resend}"),
		metric.WithDescription("Sends after the first, per logical operation: retries and redirect hops."),
		metric.WithExplicitBucketBoundaries(resendBuckets...))
	t.delay, errs[3] = m.Float64Histogram("retrystack.client.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("Planned wait before each retry."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	t.retries, errs[4] = m.Int64Counter("retrystack.client.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries decided, by reason."))
	t.pitfalls, errs[5] = m.Int64Counter("retrystack.client.pitfalls", metric.WithUnit("{pitfall}"),
		metric.WithDescription("Retry pitfalls seen, by pitfall."))
	t.circuits, errs[6] = m.Int64Counter("retrystack.client.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit-breaker state changes, by circuit and the state entered."))
	t.throttled, errs[7] = m.Int64Counter("retrystack.client.throttled", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the throttle refused locally, by host."))
	t.paced, errs[8] = m.Int64Counter("retrystack.client.paced", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that waited for a host's rate limit to reset, or stopped because the reset was past their deadline, by host and outcome."))
	t.limited, errs[9] = m.Int64Counter("retrystack.client.concurrency_limited", metric.WithUnit("{request}"),
		metric.WithDescription("Requests a concurrency limit refused: no room within their wait, by key."))
	t.injected, errs[10] = m.Int64Counter("retrystack.client.chaos.injected", metric.WithUnit("{fault}"),
		metric.WithDescription("Faults the chaos layer injected, by kind: not real failures."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return t, nil
}

// Bucket boundaries of retrystack's own histograms, in their units
// (docs/telemetry.md lists them): not variables a program could change
// under every Telemetry.
var (
	// operationBuckets (seconds): http.client.request.duration's, then on
	// to a minute, since an operation includes its waits.
	operationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}
	// delayBuckets (seconds): from a millisecond, jitter's floor, to a
	// minute, the default Retry-After cap.
	delayBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// resendBuckets (sends after the first): each small count on its own.
	resendBuckets = []float64{0, 1, 2, 3, 4, 5, 10, 20, 50}
)

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

// Observe implements middleware.Observer: an event a layer emits during
// the operation (a breaker's state change, a layer of yours) becomes an
// event of the operation's span; a breaker's state change is also a point
// of the retrystack.client.breaker.transitions metric.
func (s *opSpan) Observe(e middleware.Event) {
	if s.ended.Load() {
		return // an earlier hop's span (a redirect layer above telemetry): counted by the current one
	}
	s.t.record(s.ctx, s.span, e)
}

// record makes e an event of span and counts it in the metrics it feeds:
// the operation span's events, and those of engine.Do's hooks.
func (t *Telemetry) record(ctx context.Context, span trace.Span, e middleware.Event) {
	if span.IsRecording() {
		span.AddEvent(e.Name, trace.WithAttributes(e.Attrs...))
	}
	switch e.Name {
	case protocol.EventBreaker:
		if t.circuits != nil {
			t.circuits.Add(ctx, 1, metric.WithAttributes(attrOf(e, AttrBreakerKey, protocol.AttrBreakerKey), AttrBreakerState.String(attrOf(e, "", protocol.AttrBreakerTo).Value.AsString())))
		}
	case protocol.EventRetry:
		t.retries.Add(ctx, 1, metric.WithAttributes(attrOf(e, AttrReason, AttrReason), attrOf(e, AttrLayer, AttrLayer)))
		t.delay.Record(ctx, attrOf(e, AttrDelay, AttrDelay).Value.AsFloat64(), metric.WithAttributes(attrOf(e, AttrDelaySrc, AttrDelaySrc)))
	case protocol.EventPitfall:
		t.pitfalls.Add(ctx, 1, metric.WithAttributes(attrOf(e, AttrPitfall, AttrPitfall)))
	case protocol.EventThrottle:
		t.throttled.Add(ctx, 1, metric.WithAttributes(attrOf(e, "", protocol.AttrServerAddress), attrOf(e, "", protocol.AttrServerPort)))
	case protocol.EventLimit:
		if t.limited != nil {
			t.limited.Add(ctx, 1, metric.WithAttributes(attrOf(e, "", protocol.AttrLimitKey)))
		}
	case protocol.EventChaos:
		if t.injected != nil {
			t.injected.Add(ctx, 1, metric.WithAttributes(attrOf(e, "", protocol.AttrChaosFault)))
		}
	case protocol.EventPacing:
		t.paced.Add(ctx, 1, metric.WithAttributes(attrOf(e, "", protocol.AttrServerAddress), attrOf(e, "", protocol.AttrServerPort), attrOf(e, "", protocol.AttrPacingOutcome)))
	}
}

// attrOf is e's attribute from, under the key as (e's own key when as is
// empty).
func attrOf(e middleware.Event, as, from attribute.Key) attribute.KeyValue {
	for _, a := range e.Attrs {
		if a.Key == from {
			if as != "" {
				a.Key = as
			}
			return a
		}
	}
	return attribute.KeyValue{Key: as}
}

// errPanicked is the error an operation span ends with when a panic
// below ended its RoundTrip.
var errPanicked = errors.New("telemetry: a panic ended the operation")

// Hooks returns the engine hooks that record the retries and pitfalls of
// engine.Do, which runs outside any stack: events on the span of the
// context it is given, and the retries, delay and pitfalls metrics. The
// HTTP retry layer needs none: its retries and pitfalls reach telemetry
// as events of the operation (middleware.Operation.Emit). Joined into the
// hooks of a retry layer all the same, they record nothing that t's
// operation span records already: each retry is counted once.
func (t *Telemetry) Hooks() engine.Hooks {
	if t.tracer == nil {
		return engine.Hooks{} // its layers do not build: see Operation
	}
	return engine.Hooks{OnRetry: t.onRetry, OnPitfall: t.onPitfall}
}

func (t *Telemetry) onRetry(ev engine.Event) {
	if t.observes(ev.Context) {
		return
	}
	t.record(ev.Context, trace.SpanFromContext(ev.Context), middleware.Event{Name: protocol.EventRetry,
		Attrs: events.RetryAttrs(ev.Wait, ev.FromHint, ev.Report.Layer, ev.Cause)})
}

func (t *Telemetry) onPitfall(ev engine.Event) {
	if t.observes(ev.Context) {
		return
	}
	t.record(ev.Context, trace.SpanFromContext(ev.Context), middleware.Event{Name: protocol.EventPitfall,
		Attrs: events.PitfallAttrs(string(ev.Pitfall), ev.Cookies)})
}

// observes reports whether the hook's event belongs to an HTTP operation
// that one of t's operation spans observes: its retry layer told it
// already (middleware.Operation.Emit), and recording it again from the
// hooks would count every retry twice.
func (t *Telemetry) observes(ctx context.Context) bool {
	op := operation.DetachedFrom(ctx)
	if op == nil {
		return false
	}
	ours := false
	op.EachObserver(func(x any) {
		if s, ok := x.(*opSpan); ok && s.t == t {
			ours = true
		}
	})
	return ours
}

type operationLayer struct {
	t    *Telemetry
	next http.RoundTripper
}

// opSpan is one logical operation's span and measurements, in one
// allocation with its context and the body that ends it.
type opSpan struct {
	t             *Telemetry
	ctx           context.Context // the span's
	span          trace.Span
	start         time.Time
	method        method
	op            middleware.Operation  // the stack's; the zero Operation outside a Stack
	inStack       bool                  // op is set
	url           *url.URL              // the request's, and
	full          string                // its url.full, which the first attempt shares
	rep           *engine.Report        // the retry layer's, if any
	status        int                   // the final response's; 0 without one
	timed         bool                  // the metrics record: start is set
	callerAttempt int                   // the caller's attempt this operation serves (crosslayer.PositionOf); 0 if unknown
	user          []attribute.KeyValue  // Config.Attributes' for the request
	body          wire.Watched[*opSpan] // ends the span when the caller is done with the body
	ended         atomic.Bool           // finish ran: events are the next hop's span's
	end0          [7]attribute.KeyValue
}

// untraced marks an operation that Config.Filter left out, among the
// operation's observers, for the attempt layer below.
type untraced struct{ t *Telemetry }

// Observe implements middleware.Observer: an untraced operation's events
// are not recorded.
func (*untraced) Observe(middleware.Event) {}

func (o *operationLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	if o.t.filter != nil && !o.t.filter(req) {
		if op, ok := middleware.OperationOf(req.Context()); ok {
			op.Observe(o.t.untraced)
		}
		return wire.RoundTrip(o.next, req)
	}
	s := &opSpan{t: o.t, method: methodOf(req.Method), url: req.URL}
	if s.timed = o.t.opDuration.Enabled(req.Context()) || o.t.resends.Enabled(req.Context()); s.timed {
		s.start = time.Now()
	}
	s.full = redactURL(req.URL)
	parent := req.Context()
	if s.op, s.inStack = middleware.OperationOf(parent); s.inStack {
		s.op.Observe(s)
	}
	if in := inbound.From(parent); in != nil {
		s.callerAttempt = in.Attempt // a crosslayer.Handler's
	}
	name, opts := s.method.operationName(), internalKind
	if o.t.spanName != nil {
		name = o.t.spanName(req)
	}
	if o.t.attributes != nil {
		if s.user = o.t.attributes(req); len(s.user) > 0 {
			opts = []trace.SpanStartOption{internalKind[0], trace.WithAttributes(s.user...)}
		}
	}
	s.ctx, s.span = o.t.tracer.Start(parent, name, opts...)
	returned := false
	defer func() {
		if !returned { // a panic below: the span ends, marked, and the panic goes on
			s.finish(errPanicked, true)
		}
	}()
	resp, err := wire.RoundTrip(o.next, req.WithContext(s.ctx))
	returned = true
	if err != nil {
		s.rep = engine.ReportFrom(err)
		if se, ok := errors.AsType[*middleware.StatusError](err); ok {
			s.status = se.StatusCode // a response a layer inside made into an error
		}
		s.finish(err, true)
		return nil, err
	}
	s.rep, s.status = engine.ReportOf(resp), resp.StatusCode
	if !s.body.Watch(resp, s) {
		s.finish(nil, false)
	}
	return resp, nil
}

// finish ends the operation: at once when it failed or its response has
// no body to read, else when the caller is done with the body. err is the
// operation's error (roundTrip) or the body's.
func (s *opSpan) finish(err error, roundTrip bool) {
	s.ended.Store(true)
	stop, replayed := policy.StopSuccess, false
	refusal, refused := errors.AsType[policy.Refusal](err)
	switch {
	case s.rep != nil:
		stop, replayed = s.rep.Stop, s.rep.Replayed
	case refused && refusal.StopReason() != "":
		stop = refusal.StopReason() // a layer above any retry layer refused: a breaker outside it
	case err != nil && errors.Is(err, context.Canceled):
		stop = policy.StopCancelled
	case err != nil && roundTrip:
		stop = policy.StopNonRetryable
	case err != nil:
		stop = policy.StopBodyFailed
	}
	if s.span.IsRecording() {
		attrs := s.method.attrs(s.end0[:0])
		attrs = append(attrs, semconv.URLFull(s.full), AttrStopReason.String(string(stop)))
		if s.inStack {
			attrs = append(attrs, AttrAttempts.Int(s.op.Sends()))
		}
		if s.callerAttempt > 1 {
			attrs = append(attrs, AttrCallerAttempt.Int(s.callerAttempt))
		}
		if replayed {
			attrs = append(attrs, AttrReplayed.Bool(true))
		}
		if s.status > 0 {
			attrs = append(attrs, semconv.HTTPResponseStatusCode(s.status))
		}
		et, failed := "", stop != policy.StopSuccess && stop != policy.StopCancelled && !errors.Is(err, context.Canceled)
		if failed {
			switch {
			case err != nil:
				et = errorTypeOf(err)
			case s.status >= 400:
				et = strconv.Itoa(s.status)
			default:
				et = string(stop)
			}
			attrs = append(attrs, semconv.ErrorTypeKey.String(et))
		}
		s.span.SetAttributes(attrs...)
		// Retried errors stay on their attempt spans; this one says how
		// the operation ended. A caller's cancellation is not an error.
		if failed {
			s.span.SetStatus(codes.Error, string(stop))
		}
	}
	s.span.End()
	if ctx := s.ctx; s.timed {
		attrs := metric.WithAttributes(semconv.HTTPRequestMethodKey.String(s.method.name), AttrStopReason.String(string(stop)))
		if len(s.user) > 0 {
			attrs = metric.WithAttributes(append([]attribute.KeyValue{semconv.HTTPRequestMethodKey.String(s.method.name),
				AttrStopReason.String(string(stop))}, s.user...)...)
		}
		s.t.opDuration.Record(ctx, time.Since(s.start).Seconds(), attrs)
		if s.inStack {
			s.t.resends.Record(ctx, int64(max(s.op.Sends()-1, 0)), attrs)
		}
	}
}

// BodyDone implements wire.Watcher.
func (s *opSpan) BodyDone(err error) error {
	s.finish(err, false)
	return err
}

func (o *operationLayer) CloseIdleConnections() { wire.CloseIdle(o.next) }

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

type attemptLayer struct {
	t    *Telemetry
	next http.RoundTripper
}

// attemptSpan is one attempt's span and measurement, in one allocation
// with the body that ends it.
type attemptSpan struct {
	t       *Telemetry
	ctx     context.Context
	span    trace.Span
	start   time.Time
	method  method
	host    string
	port    int
	metered []attribute.KeyValue // the duration metric's, in attrs
	user    []attribute.KeyValue // Config.Attributes' for the operation
	timed   bool                 // the duration metric records: start is set
	body    wire.Watched[*attemptSpan]
	opts    [2]trace.SpanStartOption
	// attrs holds the attributes given at creation, which the SDK copies,
	// and then those of the response: the span's, then the metric's.
	attrs [6]attribute.KeyValue
}

func (a *attemptLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	var user []attribute.KeyValue
	if a.t.filter != nil || a.t.attributes != nil {
		traced, attrs := a.t.decided(req)
		if !traced {
			return wire.RoundTrip(a.next, req)
		}
		user = attrs
	}
	s := &attemptSpan{t: a.t, method: methodOf(req.Method), user: user}
	if s.timed = a.t.reqDuration.Enabled(req.Context()); s.timed {
		s.start = time.Now()
	}
	s.host, s.port = wire.ServerAddress(req)
	// The retry layer above, if any, numbers the send and watches the wire:
	// the connections it counts while this RoundTrip runs are this send's,
	// even when a layer between makes more sends (redirect hops).
	var resend int
	var before middleware.Wire
	op, inStack := middleware.OperationOf(req.Context())
	var solo *wire.Trace // this layer's own trace, outside a stack
	if inStack {
		resend = op.Sends() // the sends before this one, counted next to the base
		before = op.Wire(req.Context())
	}
	// What a sampler should see: the attributes known before the send.
	start := s.method.attrs(s.attrs[:0])
	start = append(start, semconv.ServerAddress(s.host), semconv.ServerPort(s.port), semconv.URLFull(urlFull(req, op)))
	if resend > 0 {
		start = append(start, semconv.HTTPRequestResendCount(resend))
	}
	s.opts = [2]trace.SpanStartOption{clientKind, trace.WithAttributes(start...)}
	ctx, span := a.t.tracer.Start(req.Context(), s.method.spanName(), s.opts[:]...)
	s.ctx, s.span = ctx, span
	r := req
	if !inStack && span.IsRecording() {
		solo = wire.GetTrace()
		defer wire.PutTrace(solo)
		cp := *solo.Client() // WithClientTrace composes into what it is given
		ctx = httptrace.WithClientTrace(ctx, &cp)
	}
	if span.SpanContext().IsValid() {
		r = req.WithContext(ctx)
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		a.t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	resp, err := wire.RoundTrip(a.next, r)
	if !span.IsRecording() && !a.t.reqDuration.Enabled(ctx) {
		span.End()
		return resp, err
	}

	// The span's own attributes first, then those it shares with the
	// duration metric.
	attrs := s.attrs[:0]
	var transparent int
	if span.IsRecording() {
		// Less the sends of hedges and redirect hops that ran meanwhile:
		// a hedge's connection is not a resend of this one.
		after := op.Wire(req.Context())
		if solo != nil {
			after = middleware.Wire{Conns: solo.Conns(), Peer: solo.Peer()}
		}
		transparent = after.Conns - before.Conns - (after.Marked - before.Marked) - 1
		if host, port, ok := splitAddr(after.Peer); ok {
			attrs = append(attrs, semconv.NetworkPeerAddress(host), semconv.NetworkPeerPort(port))
		}
		if n := middleware.HedgeOf(req.Context()); n > 0 {
			span.SetAttributes(AttrHedge.Int(n))
		}
		timeoutHeader := protocol.TimeoutHeader
		if inStack {
			timeoutHeader = op.TimeoutHeader() // the name the retry layer above sends, "" when it sends none
		}
		if v := r.Header[timeoutHeader]; timeoutHeader != "" && len(v) > 0 {
			if ms, err := strconv.ParseInt(v[0], 10, 64); err == nil {
				span.SetAttributes(AttrTimeLeft.Int64(ms))
			}
		}
	}
	own := len(attrs)
	if err == nil {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode), semconv.NetworkProtocolVersion(protocolVersion(resp)))
		if resp.StatusCode >= 400 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			if span.IsRecording() {
				span.SetStatus(codes.Error, "") // the status code says it all
			}
		}
	}
	s.metered = attrs[own:]
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		for range transparent {
			span.AddEvent(EventTransparent) // a send net/http made on its own
		}
	}
	if err != nil {
		s.finish(err)
		return nil, err
	}
	if !s.body.Watch(resp, s) {
		s.finish(nil)
	}
	return resp, nil
}

// finish ends the attempt: at once when it failed or its response has no
// body to read, else when its body is done (read to the end, closed, or
// failed: err). A caller's cancellation is not an error.
func (s *attemptSpan) finish(err error) {
	attrs := s.metered
	if err != nil && !errors.Is(err, context.Canceled) {
		kind := policy.KindOf(err)
		et := errorType(kind)
		attrs = append(attrs, et)
		if s.span.IsRecording() {
			s.span.SetAttributes(et)
			s.span.SetStatus(codes.Error, kind.String())
		}
	}
	s.span.End()
	if s.timed {
		if len(s.user) > 0 {
			attrs = append(attrs[:len(attrs):len(attrs)], s.user...)
		}
		s.t.reqDuration.Record(s.ctx, time.Since(s.start).Seconds(), httpconv.RequestMethodAttr(s.method.name), s.host, s.port, attrs...)
	}
}

// BodyDone implements wire.Watcher.
func (s *attemptSpan) BodyDone(err error) error {
	s.finish(err)
	return err
}

func (a *attemptLayer) CloseIdleConnections() { wire.CloseIdle(a.next) }

// decided returns whether the attempt req is traced and measured, and the
// operation's attributes of Config.Attributes: as the operation layer
// decided when it runs above (its span, or the mark of a request Filter
// left out, among the operation's observers), else by asking Filter and
// Attributes with req.
func (t *Telemetry) decided(req *http.Request) (traced bool, user []attribute.KeyValue) {
	op, _ := middleware.OperationOf(req.Context())
	for x := range op.Observers() {
		switch x := x.(type) {
		case *opSpan:
			if x.t == t {
				return true, x.user
			}
		case *untraced:
			if x.t == t {
				return false, nil
			}
		}
	}
	if t.filter != nil && !t.filter(req) {
		return false, nil
	}
	if t.attributes != nil {
		user = t.attributes(req)
	}
	return true, user
}

// urlFull is req's url.full: the operation span's, already made, when req
// has the operation's URL (its first hop, without Prepare). The operation
// span is found among the operation's observers: no context of its own.
func urlFull(req *http.Request, op middleware.Operation) string {
	for x := range op.Observers() {
		if s, ok := x.(*opSpan); ok && s.url == req.URL {
			return s.full
		}
	}
	return redactURL(req.URL)
}

// splitAddr gives network.peer.address and network.peer.port.
func splitAddr(a net.Addr) (string, int, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String(), a.Port, true
	case nil:
		return "", 0, false
	}
	host, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0, false
	}
	port, _ := strconv.Atoi(p)
	return host, port, true
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
