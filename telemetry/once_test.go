package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Each retry is recorded once: the HTTP operation's through its operation
// span, engine.Do's through tel.Observer, also when a hook of the HTTP
// operation runs engine.Do under its own context. (Issue 36: twice, on the
// span and in the metrics, when the hooks were joined as well.)
func TestEachRetryRecordedOnce(t *testing.T) {
	for _, joined := range []bool{false, true} {
		name := "events alone"
		if joined {
			name = "engine.Do in a hook"
		}
		t.Run(name, func(t *testing.T) {
			rec, reader, tel := instrumented(t)
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 2 {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer srv.Close()
			p := policy.Default()
			p.Backoff, p.Budget = policy.Backoff{}, nil
			cfg := retrystack.Config{Policy: &p, Telemetry: tel}
			var mine atomic.Int32
			e, err := engine.New(engine.Config{Policy: p, Layer: "stream"})
			if err != nil {
				t.Fatal(err)
			}
			streamOnce := func(ctx context.Context) {
				engine.Do(ctx, e, engine.Op[int]{Attempt: func(_ context.Context, n int) (int, error) {
					if n == 1 {
						return 0, context.DeadlineExceeded
					}
					return 1, nil
				}, Classify: func(n int, _ int, err error) policy.Decision {
					if err != nil {
						return policy.Retry("stream")
					}
					return policy.Stop(policy.StopSuccess)
				}, Observer: tel.Observer(ctx)})
			}
			if joined {
				// The user's own hook runs engine.Do under the hook's
				// context: Do's retries are its own, recorded by its observer.
				cfg.Hooks = engine.Hooks{OnRetry: func(ev engine.Event) { mine.Add(1); streamOnce(ev.Context) }}
			}
			c, err := retrystack.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			// engine.Do under the same telemetry: its observer records its retry.
			streamOnce(context.Background())

			backoffs := 0
			for _, s := range rec.Ended() {
				for _, ev := range s.Events() {
					if ev.Name == "retrystack.retry.backoff" {
						backoffs++
					}
				}
			}
			wantBackoffs, wantStream := 2, int64(1)
			if joined {
				wantBackoffs, wantStream = 4, 3 // and one of each engine.Do run in the HTTP hooks, on the operation's span
			}
			if backoffs != wantBackoffs {
				t.Errorf("%d backoff events on the spans, want %d", backoffs, wantBackoffs)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			byLayer := map[string]int64{}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != "retrystack.client.retries" {
						continue
					}
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						l, _ := dp.Attributes.Value("retrystack.layer")
						byLayer[l.AsString()] += dp.Value
					}
				}
			}
			if byLayer["http"] != 2 || byLayer["stream"] != wantStream {
				t.Errorf("retries counted %v, want http 2 and stream %d", byLayer, wantStream)
			}
			if joined && mine.Load() != 2 {
				t.Errorf("the user's own hook saw %d retries, want 2", mine.Load())
			}
		})
	}
}
