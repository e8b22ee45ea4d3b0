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
	"go.opentelemetry.io/otel/trace"
)

// The same host reads the same in every span, event and metric that names
// it: server.address the host alone, server.port its port, as the
// semantic conventions have them on the attempt spans and the HTTP
// metrics; the throttle's and the pacer's events and counters too.
// (Issue 36: those put host:port in server.address.)
func TestServerAddressLinesUp(t *testing.T) {
	rec, reader, tel := instrumented(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ra" {
			w.Header().Set("Retry-After", "30")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := policy.Default()
	p.MaxAttempts, p.Budget, p.Timeout = 1, nil, 5*time.Second
	paced, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	throttled, err := paced.InsertAfter("retry", throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	get := func(c *http.Client, path string) {
		if resp, err := c.Get(srv.URL + path); err == nil {
			resp.Body.Close()
		}
	}
	c := retrystack.Client(throttled, tr)
	for range 12 { // rejections, until the throttle refuses
		get(c, "/s")
	}
	c = retrystack.Client(paced, tr) // a client of its own: the throttle refuses the host
	get(c, "/ra")                    // holds the host for 30 s
	get(c, "/ra")                    // paced: the hold outlasts the deadline, stopped

	type server struct{ address, port string }
	want := map[server]bool{}
	got := map[string]server{} // what names the server, by where
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			a, _ := attr(s, "server.address")
			p, _ := attr(s, "server.port")
			want[server{a, p}] = true
		}
		for _, e := range s.Events() {
			var sv server
			found := false
			for _, kv := range e.Attributes {
				switch kv.Key {
				case "server.address":
					sv.address, found = kv.Value.String(), true
				case "server.port":
					sv.port = kv.Value.String()
				}
			}
			if found {
				got["event "+e.Name] = sv
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, set := range sets {
				if a, ok := set.Value("server.address"); ok {
					p, _ := set.Value("server.port")
					got["metric "+m.Name] = server{a.String(), p.String()}
				}
			}
		}
	}
	if len(want) != 1 {
		t.Fatalf("the attempt spans name %d servers, want 1: %v", len(want), want)
	}
	for _, where := range []string{"event retrystack.throttle", "event retrystack.pacing", "metric retrystack.client.throttled",
		"metric retrystack.client.paced", "metric http.client.request.duration"} {
		if sv, ok := got[where]; !ok || !want[sv] {
			t.Errorf("%s names the server %+v, want %+v as the attempt spans do", where, sv, want)
		}
	}
}
