package telemetry

import (
	"context"
	"errors"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/events"
	"github.com/retrystack/retrystack/internal/operation"
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
