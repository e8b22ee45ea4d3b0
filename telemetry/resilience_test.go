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
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A breaker's state change is a span event on the request's span and a
// point of the transitions metric; a hedge is an attempt span of its own,
// marked as one.
func TestBreakerAndHedgeOnTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}

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
			if e.Name == breaker.EventStateChange {
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
