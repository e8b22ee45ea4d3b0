package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

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
