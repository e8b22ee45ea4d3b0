package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// otelhttp as the base transport under a traced stack: one trace, our
// operation span and one attempt span per send, each attempt the parent
// of exactly one otelhttp span, and the server sees otelhttp's span as its
// parent (the innermost injection wins).
func TestOtelhttpAsBaseTransport(t *testing.T) {
	var n atomic.Int32
	var parents log
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parents.add(r.Header.Get("Traceparent"))
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	base := otelhttp.NewTransport(transport(t), otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	c, err := retrystack.NewClient(retrystack.Config{Policy: fast(), Telemetry: tel, Transport: base})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	spans := rec.Ended()
	var ops, attempts, theirs []sdktrace.ReadOnlySpan
	traces := map[trace.TraceID]bool{}
	for _, s := range spans {
		traces[s.SpanContext().TraceID()] = true
		switch {
		case s.InstrumentationScope().Name != "github.com/retrystack/retrystack/telemetry":
			theirs = append(theirs, s)
		case s.SpanKind() == trace.SpanKindInternal:
			ops = append(ops, s)
		default:
			attempts = append(attempts, s)
		}
	}
	if len(traces) != 1 || len(ops) != 1 || len(attempts) != 2 || len(theirs) != 2 {
		t.Fatalf("%d traces, %d operation, %d attempt and %d otelhttp spans; want 1, 1, 2, 2", len(traces), len(ops), len(attempts), len(theirs))
	}
	children := map[trace.SpanID]int{}
	for _, s := range theirs {
		children[s.Parent().SpanID()]++
	}
	for _, a := range attempts {
		if a.Parent().SpanID() != ops[0].SpanContext().SpanID() {
			t.Errorf("attempt span %s is not a child of the operation span", a.Name())
		}
		if children[a.SpanContext().SpanID()] != 1 {
			t.Errorf("attempt span has %d otelhttp children, want 1", children[a.SpanContext().SpanID()])
		}
	}
	for i, tp := range parents.get() {
		if want := theirs[i].SpanContext().SpanID().String(); len(tp) < 52 || tp[36:52] != want {
			t.Errorf("send %d: traceparent %q, want otelhttp's span %s as the parent", i+1, tp, want)
		}
	}
}
