package middleware

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/retrystack/retrystack/internal/protocol"
	"go.opentelemetry.io/otel/attribute"
)

// Log returns a layer, named "log", that logs the events of each
// operation passing through it to l (LogObserver): put it outermost, or
// anywhere above the layers whose events you want. Each record also
// carries the request's method and host, never its path, query or
// headers. With a nil l the layer passes requests through untouched.
func Log(l *slog.Logger) Layer {
	return Layer{Name: "log", Wrap: func(next http.RoundTripper) http.RoundTripper {
		if l == nil {
			return next
		}
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if op, ok := OperationOf(req.Context()); ok {
				op.Observe(&logObserver{l: l, ctx: req.Context(), method: req.Method, host: req.URL.Host})
			}
			return next.RoundTrip(req)
		})
	}}
}

// LogObserver returns an observer that logs each event to l under ctx
// (for engine.Do, engine.Op.Observer): give-ups and pitfalls at Warn, a
// circuit's change of state at Info, the rest (retries, refusals,
// hedges, pacing, limits, throttling, injected faults) at Debug. The
// record's message is the event's name and its attributes are the
// event's: no cookie values, URLs or headers, which no event carries.
func LogObserver(ctx context.Context, l *slog.Logger) Observer {
	return &logObserver{l: l, ctx: ctx}
}

type logObserver struct {
	l            *slog.Logger
	ctx          context.Context
	method, host string // the request's, under Log
}

// Observe implements Observer.
func (o *logObserver) Observe(e Event) {
	level := slog.LevelDebug
	switch e.Name {
	case protocol.EventGiveUp, protocol.EventPitfall:
		level = slog.LevelWarn
	case protocol.EventBreaker:
		level = slog.LevelInfo
	}
	if !o.l.Enabled(o.ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(e.Attrs)+2)
	if o.method != "" {
		attrs = append(attrs, slog.String("http.request.method", o.method), slog.String("server.address", o.host))
	}
	for _, a := range e.Attrs {
		attrs = append(attrs, slog.Any(string(a.Key), logValue(a.Value)))
	}
	o.l.LogAttrs(o.ctx, level, e.Name, attrs...)
}

// logValue is v as slog logs it best: a number stays a number.
func logValue(v attribute.Value) any {
	switch v.Type() {
	case attribute.BOOL:
		return v.AsBool()
	case attribute.INT64:
		return v.AsInt64()
	case attribute.FLOAT64:
		return v.AsFloat64()
	case attribute.STRING:
		return v.AsString()
	}
	return v.AsInterface()
}
