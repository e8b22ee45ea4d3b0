package limit

import (
	"context"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// An adaptive key's limit, where latency moved it, is readable through
// Limit and the gauge gaugeName; a key never seen answers Config.Limit.
func TestLimitReadable(t *testing.T) {
	const S = 10 * time.Millisecond
	s := newSim(t, Config{Limit: 10, Adaptive: true})
	s.start()
	s.run(service{c: 20, s: S}, 5000, 1<<30)
	limit, inFlight := s.l.Limit("svc")
	if limit != s.limit || limit == 10 || inFlight != len(s.held) {
		t.Fatalf("Limit: %d, %d in flight; want the key's %d (moved from 10), %d in flight", limit, inFlight, s.limit, len(s.held))
	}
	if limit, inFlight := s.l.Limit("never-seen"); limit != 10 || inFlight != 0 {
		t.Fatalf("a key never seen: %d, %d; want 10, 0", limit, inFlight)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, err := s.l.Instrument(mp)
	if err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != gaugeName {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				k, _ := dp.Attributes.Value(protocol.AttrLimitKey)
				got[k.AsString()] = dp.Value
			}
		}
	}
	if len(got) != 1 || got["svc"] != int64(limit) {
		t.Fatalf("gauge %v; want svc at %d", got, limit)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
}
