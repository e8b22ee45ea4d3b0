package telemetry_test

// Config.SpanName, Filter and Attributes, the options otelhttp users reach
// for (WithSpanNameFormatter, WithFilter, Labeler and
// WithMetricAttributesFn), against the in-memory span exporter and a
// manual metric reader.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
)

// optRig is a traced stack over a server whose every path answers 503
// once, then 200, and notes the traceparent each request carried.
type optRig struct {
	spans   *tracetest.InMemoryExporter
	reader  *sdkmetric.ManualReader
	sampler *noting
	srv     *httptest.Server
	tel     *telemetry.Telemetry
	mu      sync.Mutex
	seen    map[string]int
	parents map[string][]string // path → traceparent of each request
}

func newOptRig(t *testing.T, cfg telemetry.Config) *optRig {
	t.Helper()
	r := &optRig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader(), sampler: &noting{},
		seen: map[string]int{}, parents: map[string][]string{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans), sdktrace.WithSampler(r.sampler))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	cfg.TracerProvider, cfg.MeterProvider = tp, mp
	var err error
	if r.tel, err = telemetry.New(cfg); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen[req.URL.Path]++
		n := r.seen[req.URL.Path]
		r.parents[req.URL.Path] = append(r.parents[req.URL.Path], req.Header.Get("Traceparent"))
		r.mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() {
		r.srv.Close()
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	return r
}

// get sends GET path through stack (built with the rig's telemetry) and
// reads the body to the end.
func (r *optRig) get(t *testing.T, stack middleware.Stack, path string, header ...string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", r.srv.URL+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := retrystack.Client(stack, tr).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, want 200 after a retry", path, resp.StatusCode)
	}
}

func (r *optRig) stack(t *testing.T) middleware.Stack {
	t.Helper()
	p := policy.Default()
	p.Backoff.Base = time.Microsecond
	s, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: r.tel})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// names returns the ended spans' names, sorted.
func (r *optRig) names() []string {
	var out []string
	for _, s := range r.spans.GetSpans() {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// points returns, per metric name, the attribute sets of its data points
// (histograms and sums), each as "k=v,k=v" sorted.
func (r *optRig) points(t *testing.T) map[string][]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	add := func(name string, set attribute.Set) {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		out[name] = append(out[name], strings.Join(kv, ","))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes)
				}
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// SpanName names the operation span; the attempt spans keep the
// conventions' names.
func TestSpanNameFormatter(t *testing.T) {
	r := newOptRig(t, telemetry.Config{SpanName: func(req *http.Request) string {
		return "users " + req.Method // a route, as a server's mux names it
	}})
	r.get(t, r.stack(t), "/users/42")
	if diff := cmp.Diff([]string{"GET", "GET", "users GET"}, r.names()); diff != "" {
		t.Errorf("span names (-want +got):\n%s", diff)
	}
	if _, ok := r.sampler.seen["users GET"]; !ok {
		t.Error("the sampler was not shown the operation span under its formatted name")
	}
}

// A request Filter refuses is neither traced nor measured, and carries no
// trace context; it is still retried. The others are traced as before.
func TestFilter(t *testing.T) {
	r := newOptRig(t, telemetry.Config{Filter: func(req *http.Request) bool { return req.URL.Path != "/health" }})
	s := r.stack(t)
	r.get(t, s, "/health")
	if got := r.names(); len(got) != 0 {
		t.Errorf("a filtered request left spans %v", got)
	}
	if got := r.points(t); len(got) != 0 {
		t.Errorf("a filtered request was measured: %v", got)
	}
	r.get(t, s, "/orders")
	if diff := cmp.Diff([]string{"GET", "GET", "retrystack GET"}, r.names()); diff != "" {
		t.Errorf("span names after a traced request (-want +got):\n%s", diff)
	}
	pts := r.points(t)
	for _, name := range []string{"http.client.request.duration", "retrystack.client.operation.duration", "retrystack.client.retries"} {
		if len(pts[name]) == 0 {
			t.Errorf("%s: no data point for the traced request", name)
		}
	}
	if n := len(pts["http.client.request.duration"]); n != 2 { // its 503 and its 200, the filtered ones absent
		t.Errorf("http.client.request.duration has %d series, want 2 (503, 200): %v", n, pts["http.client.request.duration"])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.parents["/health"]; !slices.Equal(got, []string{"", ""}) {
		t.Errorf("the filtered request's two sends carried traceparent %q, want none", got)
	}
	if got := r.parents["/orders"]; len(got) != 2 || got[0] == "" || got[1] == "" || got[0] == got[1] {
		t.Errorf("the traced request's sends carried traceparent %q, want one per attempt", got)
	}
}

// Without the operation layer above, the attempt layer asks Filter itself.
func TestFilterAttemptLayerAlone(t *testing.T) {
	r := newOptRig(t, telemetry.Config{Filter: func(req *http.Request) bool { return req.URL.Path != "/health" }})
	s, err := r.stack(t).Without("telemetry")
	if err != nil {
		t.Fatal(err)
	}
	r.get(t, s, "/health")
	r.get(t, s, "/orders")
	if diff := cmp.Diff([]string{"GET", "GET"}, r.names()); diff != "" {
		t.Errorf("span names (-want +got):\n%s", diff)
	}
}

// Attributes of the caller's own go on the operation span from its start
// (a sampler sees them) and on the operation's and its attempts'
// measurements; the attempt spans keep the conventions' attributes.
func TestAttributes(t *testing.T) {
	tenant := attribute.Key("tenant")
	r := newOptRig(t, telemetry.Config{Attributes: func(req *http.Request) []attribute.KeyValue {
		return []attribute.KeyValue{tenant.String(req.Header.Get("X-Tenant"))}
	}})
	r.get(t, r.stack(t), "/orders", "X-Tenant", "acme")
	var op sdktrace.ReadOnlySpan
	for _, s := range r.spans.GetSpans() {
		v, ok := attr(s.Snapshot(), "tenant")
		switch {
		case s.Name == "retrystack GET":
			op = s.Snapshot()
			if !ok || v != "acme" {
				t.Errorf("operation span: tenant = %q, %v; want acme", v, ok)
			}
		case ok:
			t.Errorf("attempt span %s carries tenant", s.Name)
		}
	}
	if op == nil {
		t.Fatal("no operation span")
	}
	if !slices.Contains(r.sampler.keys("retrystack GET"), "tenant") {
		t.Errorf("the sampler saw %v at the operation span's start, not tenant", r.sampler.keys("retrystack GET"))
	}
	pts := r.points(t)
	for _, name := range []string{"retrystack.client.operation.duration", "retrystack.client.operation.resends", "http.client.request.duration"} {
		if len(pts[name]) == 0 {
			t.Errorf("%s: no data point", name)
		}
		for _, p := range pts[name] {
			if !strings.Contains(p, "tenant=acme") {
				t.Errorf("%s: a point without tenant=acme: %s", name, p)
			}
		}
	}
}
