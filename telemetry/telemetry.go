package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/engine"
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

// ScopeName is the instrumentation scope of every span and instrument.
const ScopeName = "github.com/retrystack/retrystack/telemetry"

// Attribute keys of retrystack's own span attributes, events and metrics.
const (
	AttrAttempts   = attribute.Key("retrystack.attempts")        // sends of an operation
	AttrStopReason = attribute.Key("retrystack.stop_reason")     // policy.StopReason
	AttrDelay      = attribute.Key("retrystack.retry.delay")     // planned wait, in seconds
	AttrDelaySrc   = attribute.Key("retrystack.retry.source")    // "policy" or "retry-after"
	AttrReason     = attribute.Key("reason")                     // the retries metric: Decision.Cause
	AttrPitfall    = attribute.Key("pitfall")                    // the pitfall's name
	AttrCookies    = attribute.Key("retrystack.pitfall.cookies") // cookie-lost: names, never values
	AttrLayer      = attribute.Key("retrystack.layer")           // which nested retry level: "http" or "stream"
)

// Event names.
const (
	EventBackoff     = "retrystack.retry.backoff"
	EventPitfall     = "retrystack.pitfall"
	EventTransparent = "retrystack.transparent_attempt"
)

// Config injects the providers. Nil fields use the global ones (otel's
// defaults are no-ops) and W3C TraceContext.
type Config struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator
}

// Telemetry holds the tracer, the propagator and the instruments. It is
// safe for concurrent use; one serves a whole client.
type Telemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	reqDuration httpconv.ClientRequestDuration
	opDuration  metric.Float64Histogram
	resends     metric.Int64Histogram
	delay       metric.Float64Histogram
	retries     metric.Int64Counter
	pitfalls    metric.Int64Counter
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
		prop = propagation.TraceContext{}
	}
	m := mp.Meter(ScopeName)
	t := &Telemetry{tracer: tp.Tracer(ScopeName), prop: prop}
	var errs [6]error
	t.reqDuration, errs[0] = httpconv.NewClientRequestDuration(m)
	t.opDuration, errs[1] = m.Float64Histogram("retrystack.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of logical operations: every attempt, wait and redirect hop."))
	t.resends, errs[2] = m.Int64Histogram("retrystack.client.operation.resends", metric.WithUnit("{resend}"),
		metric.WithDescription("Sends after the first, per logical operation: retries and redirect hops."))
	t.delay, errs[3] = m.Float64Histogram("retrystack.client.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("Planned wait before each retry."))
	t.retries, errs[4] = m.Int64Counter("retrystack.client.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries decided, by reason."))
	t.pitfalls, errs[5] = m.Int64Counter("retrystack.client.pitfalls", metric.WithUnit("{pitfall}"),
		metric.WithDescription("Retry pitfalls seen, by pitfall."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return t, nil
}

// notMadeByNew is why a Telemetry that New did not make has no layers.
const notMadeByNew = "a Telemetry must be made by telemetry.New"

// Tracer returns the tracer the layers use, for spans around them.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Operation returns the layer "telemetry": the logical operation's span
// and metrics. Put it outermost, so redirect hops fall inside it.
func (t *Telemetry) Operation() middleware.Layer {
	if t.tracer == nil {
		return middleware.InvalidLayer("telemetry", notMadeByNew)
	}
	return middleware.Layer{Name: "telemetry", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &operation{t: t, next: middleware.Base(next)}
	}}
}

// Attempt returns the layer "attempt-telemetry": one CLIENT span and one
// http.client.request.duration measurement per physical attempt, and the
// trace context injected into it. Put it innermost, just above the
// transport.
func (t *Telemetry) Attempt() middleware.Layer {
	if t.tracer == nil {
		return middleware.InvalidLayer("attempt-telemetry", notMadeByNew)
	}
	return middleware.Layer{Name: "attempt-telemetry", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &attempt{t: t, next: middleware.Base(next)}
	}}
}

// Hooks returns the engine hooks that record retries and pitfalls: events
// on the operation's span, and the retries, delay and pitfalls metrics.
// Join them with the caller's own with engine.JoinHooks.
func (t *Telemetry) Hooks() engine.Hooks {
	if t.tracer == nil {
		return engine.Hooks{} // its layers do not build: see Operation
	}
	return engine.Hooks{OnRetry: t.onRetry, OnPitfall: t.onPitfall}
}

func (t *Telemetry) onRetry(ev engine.RetryEvent) {
	source := "policy"
	if ev.FromHint {
		source = "retry-after"
	}
	if span := trace.SpanFromContext(ev.Context); span.IsRecording() {
		span.AddEvent(EventBackoff, trace.WithAttributes(
			AttrDelay.Float64(ev.Wait.Seconds()), AttrDelaySrc.String(source), AttrLayer.String(ev.Report.Layer)))
	}
	t.retries.Add(ev.Context, 1, metric.WithAttributes(AttrReason.String(ev.Cause), AttrLayer.String(ev.Report.Layer)))
	t.delay.Record(ev.Context, ev.Wait.Seconds(), metric.WithAttributes(AttrDelaySrc.String(source)))
}

func (t *Telemetry) onPitfall(ev engine.PitfallEvent) {
	if span := trace.SpanFromContext(ev.Context); span.IsRecording() {
		attrs := []attribute.KeyValue{AttrPitfall.String(string(ev.Pitfall))}
		if len(ev.Cookies) > 0 {
			attrs = append(attrs, AttrCookies.StringSlice(ev.Cookies))
		}
		span.AddEvent(EventPitfall, trace.WithAttributes(attrs...))
	}
	t.pitfalls.Add(ev.Context, 1, metric.WithAttributes(AttrPitfall.String(string(ev.Pitfall))))
}

type operation struct {
	t    *Telemetry
	next http.RoundTripper
}

func (o *operation) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	ctx, op := middleware.WithOperation(req.Context())
	ctx, span := o.t.tracer.Start(ctx, operationName(method(req)), internalKind)
	resp, err := wire.RoundTrip(o.next, req.WithContext(ctx))

	var rep *engine.Report
	if err == nil {
		rep = engine.ReportOf(resp)
	} else {
		rep = engine.ReportFrom(err)
	}
	stop := policy.StopSuccess
	switch {
	case rep != nil:
		stop = rep.Stop
	case err != nil:
		stop = policy.StopNonRetryable
	}
	if span.IsRecording() {
		// One call: each grows the span's attributes.
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method(req)), semconv.URLFull(RedactURL(req.URL)),
			AttrAttempts.Int(op.Count()), AttrStopReason.String(string(stop)))
		if resp != nil {
			attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode))
		}
		span.SetAttributes(attrs...)
		// Retried errors stay on their attempt spans; this one says how
		// the operation ended. A caller's cancellation is not an error.
		if stop != policy.StopSuccess && stop != policy.StopCancelled && !errors.Is(err, context.Canceled) {
			span.SetStatus(codes.Error, string(stop))
		}
	}
	span.End()
	if o.t.opDuration.Enabled(ctx) || o.t.resends.Enabled(ctx) {
		attrs := metric.WithAttributes(semconv.HTTPRequestMethodKey.String(method(req)), AttrStopReason.String(string(stop)))
		o.t.opDuration.Record(ctx, time.Since(start).Seconds(), attrs)
		o.t.resends.Record(ctx, int64(max(op.Count()-1, 0)), attrs)
	}
	return resp, err
}

// The span kinds, as options made once.
var (
	internalKind = trace.WithSpanKind(trace.SpanKindInternal)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
)

// operationName avoids building the common span names per request.
func operationName(method string) string {
	switch method {
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
	return "retrystack " + method
}

func (o *operation) CloseIdleConnections() { middleware.CloseIdleConnections(o.next) }

type attempt struct {
	t    *Telemetry
	next http.RoundTripper
}

func (a *attempt) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	// The retry layer above, if any, numbers the send and watches the wire:
	// the connections it counts while this RoundTrip runs are this send's,
	// even when a layer between makes more sends (redirect hops).
	sender := middleware.SenderFrom(req.Context())
	var resend, conns0 int
	if sender != nil {
		resend, conns0 = sender.Resend(), sender.Conns()
	} else {
		resend = middleware.Resend(req.Context())
	}
	ctx, span := a.t.tracer.Start(req.Context(), method(req), clientKind)
	host, port := hostPort(req)
	r := req
	var conns *atomic.Int32 // connections obtained: one per physical send
	if sender == nil && span.IsRecording() {
		conns = new(atomic.Int32)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }})
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

	// The span's own attributes, then those it shares with the duration
	// metric: one slice, and one SetAttributes.
	attrs := make([]attribute.KeyValue, 0, 9)
	if span.IsRecording() {
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method(req)), semconv.ServerAddress(host),
			semconv.ServerPort(port), semconv.URLFull(RedactURL(req.URL)))
		if resend > 0 {
			attrs = append(attrs, semconv.HTTPRequestResendCount(resend))
		}
	}
	own := len(attrs)
	switch {
	case err != nil:
		kind := policy.KindOf(err)
		attrs = append(attrs, errorType(kind))
		if span.IsRecording() && kind != policy.ErrorCanceled { // the caller's cancellation is no error
			span.SetStatus(codes.Error, kind.String())
		}
	default:
		attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode), semconv.NetworkProtocolVersion(protocolVersion(resp)))
		if resp.StatusCode >= 400 {
			code := strconv.Itoa(resp.StatusCode)
			attrs = append(attrs, semconv.ErrorTypeKey.String(code))
			if span.IsRecording() {
				span.SetStatus(codes.Error, code)
			}
		}
	}
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		n := 0
		if sender != nil {
			n = sender.Conns() - conns0
		} else {
			n = int(conns.Load())
		}
		for range n - 1 {
			span.AddEvent(EventTransparent) // a send net/http made on its own
		}
	}
	span.End() // at the headers: the body is the caller's, drained or not
	a.t.reqDuration.Record(ctx, time.Since(start).Seconds(), httpconv.RequestMethodAttr(method(req)), host, port, attrs[own:]...)
	return resp, err
}

func (a *attempt) CloseIdleConnections() { middleware.CloseIdleConnections(a.next) }

func errorType(k policy.ErrorKind) attribute.KeyValue {
	if k == policy.ErrorOther {
		return semconv.ErrorTypeOther
	}
	return semconv.ErrorTypeKey.String(k.String())
}

func method(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// hostPort returns server.address and server.port, the port always, from
// the scheme's default when the URL has none.
func hostPort(req *http.Request) (string, int) {
	host, p := req.URL.Hostname(), req.URL.Port()
	if p == "" {
		if req.URL.Scheme == "https" {
			return host, 443
		}
		return host, 80
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

func protocolVersion(resp *http.Response) string {
	if resp.ProtoMajor == 2 {
		return "2"
	}
	return strconv.Itoa(resp.ProtoMajor) + "." + strconv.Itoa(resp.ProtoMinor)
}
