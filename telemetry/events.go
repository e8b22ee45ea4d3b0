package telemetry

import (
	"context"
	"errors"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

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

// Observer returns an observer for engine.Do (engine.Op.Observer), which
// runs outside any stack: it records the operation's events on the span
// of ctx, as the operation span records a stack's, and counts them in the
// retries, delay and pitfalls metrics. A stack needs none: its
// operation span observes each operation it starts.
func (t *Telemetry) Observer(ctx context.Context) middleware.Observer {
	return &spanObserver{t: t, ctx: ctx}
}

// spanObserver records events on the span of its context.
type spanObserver struct {
	t   *Telemetry
	ctx context.Context
}

// Observe implements middleware.Observer.
func (o *spanObserver) Observe(e middleware.Event) {
	if o.t.tracer == nil {
		return // not made by New: see Operation
	}
	o.t.record(o.ctx, trace.SpanFromContext(o.ctx), e)
}
