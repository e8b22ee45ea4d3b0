package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// counted sums the points of the counter name whose attribute key is val.
func counted(t *testing.T, rm metricdata.ResourceMetrics, name, key, val string) int64 {
	t.Helper()
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := dp.Attributes.Value(attributeKey(key)); key == "" || ok && v.AsString() == val {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// The throttle's refusals and pacing's waits and stops are counted, by
// host, with no wiring: telemetry observes the layers' events.
func TestThrottleAndPacingOnTelemetry(t *testing.T) {
	_, reader, tel := instrumented(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	p := policy.Default()
	p.MaxAttempts = 1
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err == nil {
		stack, err = stack.InsertAfter("retry", throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := retrystack.Client(stack, tr)
	// The first: a 429 that holds the host 30 s. The second, with a
	// deadline of 1 s: stopped by pacing. No more reach the throttle.
	if resp, err := c.Get(srv.URL); err == nil {
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("the held host answered")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := counted(t, rm, "retrystack.client.paced", "retrystack.pacing.outcome", "stopped"); n != 1 {
		t.Errorf("%d stopped by pacing, want 1", n)
	}
	// A host that only rejects, pacing off: the throttle refuses (draw
	// 0) once the formula allows it.
	p2 := policy.Default()
	p2.RetryAfter.Pace, p2.MaxAttempts = false, 1
	thr2, _ := retrystack.NewStack(retrystack.Config{Policy: &p2, Telemetry: tel})
	thr2, _ = thr2.InsertAfter("retry", throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}))
	c2 := retrystack.Client(thr2, tr)
	for range 15 { // the throttle judges a host from 10 requests in its window
		if resp, err := c2.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := counted(t, rm, "retrystack.client.throttled", "", ""); n < 1 {
		t.Errorf("%d throttled, want some", n)
	}
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }
