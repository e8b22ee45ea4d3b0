package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// instrumented is a Telemetry recording its spans and metrics in memory.
func instrumented(t *testing.T) (*tracetest.SpanRecorder, *sdkmetric.ManualReader, *telemetry.Telemetry) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	return rec, reader, tel
}

// A breaker's state change is a span event on the request's span and a
// point of the transitions metric; a hedge is an attempt span of its own,
// marked as one.
func TestBreakerAndHedgeOnTelemetry(t *testing.T) {
	rec, reader, tel := instrumented(t)

	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1: // slow: hedged
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case 2:
			w.Write([]byte("ok"))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	stack, err = stack.InsertAfter("retry", breaker.Layer(breaker.Config{Consecutive: 2}))
	if err == nil {
		stack, err = stack.InsertAfter("breaker", hedge.Layer(hedge.Config{Delay: 20 * time.Millisecond}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := retrystack.Client(stack, tr)
	for range 2 { // the first is hedged; the second opens the breaker
		if resp, err := c.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}

	hedges, opened := 0, 0
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			if v, ok := attr(s, "retrystack.hedge"); ok && v == "1" {
				hedges++
			}
		}
		for _, e := range s.Events() {
			if e.Name == middleware.EventBreakerChange {
				opened++
			}
		}
	}
	if hedges != 1 || opened != 1 {
		t.Errorf("%d hedge attempt spans, %d state-change events; want 1, 1", hedges, opened)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "retrystack.client.breaker.transitions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if to, _ := dp.Attributes.Value(telemetry.AttrBreakerState); to.AsString() == "open" && dp.Value == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("no transition to open in the metric")
	}
}

// With the redirect layer above telemetry, each hop has an operation span;
// a breaker's state change is counted once, by the span of its hop. A
// breaker above the retry layer that refuses names the span's stop; a
// panic below still ends the span.
func TestEventsPerHopAndRefusalsAbove(t *testing.T) {
	rec, reader, tel := instrumented(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/panic":
			w.WriteHeader(http.StatusTeapot)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	p := policy.Never()
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err == nil {
		stack, err = stack.Select("redirect", "telemetry", "cookies", "retry", "attempt-telemetry")
	}
	if err == nil {
		stack, err = stack.InsertAfter("retry", breaker.Layer(breaker.Config{Consecutive: 1, Key: func(r *http.Request) string { return r.URL.Path }}))
	}
	if err == nil {
		stack, err = stack.InsertBefore("attempt-telemetry", middleware.Layer{Name: "panic", Wrap: func(next http.RoundTripper) http.RoundTripper {
			return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Path == "/panic" {
					panic("below")
				}
				return next.RoundTrip(req)
			})
		}})
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := retrystack.Client(stack, tr)
	if resp, err := c.Get(srv.URL + "/a"); err == nil { // /a → /b: 500 opens /b's circuit
		resp.Body.Close()
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "retrystack.client.breaker.transitions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if dp.Value != 1 {
					t.Errorf("transition %v counted %d times, want once", dp.Attributes.ToSlice(), dp.Value)
				}
			}
		}
	}

	// The breaker above the retry layer: its refusal is the span's stop.
	above, err := stack.Without("redirect")
	if err == nil {
		above, err = above.Without("cookies")
	}
	if err == nil {
		above, err = above.Select("telemetry", "breaker", "retry", "panic", "attempt-telemetry")
	}
	if err != nil {
		t.Fatal(err)
	}
	c = retrystack.Client(above, tr)
	for range 2 { // a 500 opens /b's circuit; the second is refused
		if resp, err := c.Get(srv.URL + "/b"); err == nil {
			resp.Body.Close()
		}
	}
	last := rec.Ended()[len(rec.Ended())-1]
	if v, _ := attr(last, "retrystack.stop_reason"); v != "circuit-open" {
		t.Errorf("a refused operation's span stop_reason %q, want circuit-open", v)
	}

	// A panic below: the span ends all the same.
	before := len(rec.Ended())
	func() {
		defer func() { recover() }()
		c.Get(srv.URL + "/panic")
	}()
	if len(rec.Ended()) == before {
		t.Error("the operation span of a panicking request never ended")
	}
}
