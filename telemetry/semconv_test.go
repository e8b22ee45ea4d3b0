package telemetry_test

// The HTTP semantic conventions (v1.43.0) point by point: an in-memory
// span recorder and a manual metric reader against real servers.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// rig is a traced default stack with a recorder, a metric reader and a
// sampler that notes the attributes it was shown.
type rig struct {
	client  *http.Client
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	sampler *noting
}

func newRig(t *testing.T, p policy.Policy, cfg ...func(*retrystack.Config)) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), sampler: &noting{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans), sdktrace.WithSampler(r.sampler))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	p.Backoff.Base = time.Microsecond
	tr := &http.Transport{}
	c := retrystack.Config{Policy: &p, Telemetry: tel, Transport: tr}
	for _, f := range cfg {
		f(&c)
	}
	if r.client, err = retrystack.NewClient(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	return r
}

// noting samples everything and keeps the attributes each span started with.
type noting struct {
	mu   sync.Mutex
	seen map[string][]attribute.KeyValue
}

func (n *noting) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string][]attribute.KeyValue{}
	}
	n.seen[p.Name] = append([]attribute.KeyValue(nil), p.Attributes...)
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (n *noting) Description() string { return "noting" }

func (n *noting) keys(name string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, kv := range n.seen[name] {
		out = append(out, string(kv.Key))
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// byKind splits the ended spans into operation and attempt spans.
func (r *rig) byKind() (ops, attempts []sdktrace.ReadOnlySpan) {
	for _, s := range r.spans.Ended() {
		if s.SpanKind() == trace.SpanKindInternal {
			ops = append(ops, s)
		} else {
			attempts = append(attempts, s)
		}
	}
	return ops, attempts
}

// durationPoints returns the attribute sets of http.client.request.duration.
func (r *rig) durationPoints(t *testing.T) []attribute.Set {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []attribute.Set
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "http.client.request.duration" {
				for _, p := range h.DataPoints {
					out = append(out, p.Attributes)
				}
			}
		}
	}
	return out
}

// A body that fails is no success: both spans end when the body is done,
// Error, with the failure's error.type, and the operation's stop reason is
// the report's. Until the caller is done with the body, no span has ended.
func TestBodyFailureOnSpans(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := newRig(t, policy.Default())
	resp, err := r.client.Get(srv.URL() + "/truncated?reset=1")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.spans.Ended()); n != 0 {
		t.Errorf("%d spans ended before the body was read", n)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if engine.ReportFrom(err) == nil {
		t.Fatalf("body error %v", err)
	}
	ops, attempts := r.byKind()
	if len(ops) != 1 || len(attempts) != 1 {
		t.Fatalf("%d operation and %d attempt spans", len(ops), len(attempts))
	}
	for _, s := range []sdktrace.ReadOnlySpan{ops[0], attempts[0]} {
		et, _ := attr(s, "error.type")
		if s.Status().Code != codes.Error || (et != "reset" && et != "eof") {
			t.Errorf("%s: status %v, error.type %q; want Error and the body's failure", s.Name(), s.Status(), et)
		}
	}
	if stop, _ := attr(ops[0], "retrystack.stop_reason"); stop != string(policy.StopBodyFailed) {
		t.Errorf("operation stop_reason %q, want %s", stop, policy.StopBodyFailed)
	}
	points := r.durationPoints(t)
	if len(points) != 1 {
		t.Fatalf("%d duration points", len(points))
	}
	if v, ok := points[0].Value("error.type"); !ok || (v.AsString() != "reset" && v.AsString() != "eof") {
		t.Errorf("duration metric error.type %v, want the body's failure", v)
	}
}

// A body read that runs out of its attempt's time reports attempt-timeout.
func TestSlowBodyOnSpans(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p := policy.Default()
	p.AttemptTimeout = 50 * time.Millisecond
	r := newRig(t, p)
	resp, err := r.client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	ops, attempts := r.byKind()
	if stop, _ := attr(ops[0], "retrystack.stop_reason"); stop != string(policy.StopAttemptTimeout) || ops[0].Status().Code != codes.Error {
		t.Errorf("operation: stop_reason %q, status %v", stop, ops[0].Status())
	}
	if et, _ := attr(attempts[0], "error.type"); et != "timeout" || attempts[0].Status().Code != codes.Error {
		t.Errorf("attempt: error.type %q, status %v", et, attempts[0].Status())
	}
}

// Cancellation is no error: no error.type on the spans or the duration
// metric, and status unset, whether the caller cancels during an attempt
// or while reading the body.
func TestCancellationIsNoErrorType(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
		sent <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	r := newRig(t, policy.Default())
	for _, path := range []string{"/headers", "/body"} {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-sent; cancel() }()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		if resp, err := r.client.Do(req); err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		cancel()
	}
	for _, s := range r.spans.Ended() {
		if et, ok := attr(s, "error.type"); ok || s.Status().Code != codes.Unset {
			t.Errorf("%s: error.type %q, status %v; want none and unset", s.Name(), et, s.Status())
		}
	}
	for _, p := range r.durationPoints(t) {
		if v, ok := p.Value("error.type"); ok {
			t.Errorf("duration metric with error.type %q", v.AsString())
		}
	}
}

// url.full redacts the v1.42+ list (and the older SigV2 keys) in an S3
// SigV4 presigned URL: the signature, the credential and the session
// token, never the other parameters.
func TestRedactPresignedURL(t *testing.T) {
	presigned := "https://bucket.s3.us-east-1.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T000000Z" +
		"&X-Amz-Expires=3600&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEXAMPLE&X-Amz-SignedHeaders=host" +
		"&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
	want := "https://bucket.s3.us-east-1.amazonaws.com/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=REDACTED&X-Amz-Date=20261201T000000Z" +
		"&X-Amz-Expires=3600&X-Amz-Security-Token=REDACTED&X-Amz-SignedHeaders=host" +
		"&X-Amz-Signature=REDACTED"
	u, _ := url.Parse(presigned)
	if got := telemetry.RedactURL(u); got != want {
		t.Errorf("RedactURL =\n%s\nwant\n%s", got, want)
	}
	old, _ := url.Parse("https://a.test/?sig=s&Signature=t&AWSAccessKeyId=k&X-Goog-Signature=g&q=1")
	if got, want := telemetry.RedactURL(old), "https://a.test/?sig=REDACTED&Signature=REDACTED&AWSAccessKeyId=REDACTED&X-Goog-Signature=REDACTED&q=1"; got != want {
		t.Errorf("RedactURL = %s, want %s", got, want)
	}
	// Through the stack: both spans.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	r := newRig(t, policy.Default())
	resp, err := r.client.Get(srv.URL + "/o?" + u.RawQuery)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, s := range r.spans.Ended() {
		full, _ := attr(s, "url.full")
		for _, secret := range []string{"AKIAIOSFODNN7EXAMPLE", "IQoJb3JpZ2luX2VjEXAMPLE", "fe5f80f7"} {
			if strings.Contains(full, secret) {
				t.Errorf("%s: url.full %s carries %s", s.Name(), full, secret)
			}
		}
	}
}

// Unknown methods, "get" included (methods are case-sensitive), are _OTHER
// with the original kept apart; the span names become "HTTP".
func TestUnknownMethods(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, m := range []string{"PURGE", "get"} {
		r := newRig(t, policy.Default())
		req, _ := http.NewRequest(m, srv.URL, nil)
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ops, attempts := r.byKind()
		for _, c := range []struct {
			s    sdktrace.ReadOnlySpan
			name string
		}{{ops[0], "retrystack HTTP"}, {attempts[0], "HTTP"}} {
			method, _ := attr(c.s, "http.request.method")
			orig, _ := attr(c.s, "http.request.method_original")
			if c.s.Name() != c.name || method != "_OTHER" || orig != m {
				t.Errorf("%s: span %q, method %q, original %q; want %q, _OTHER, %s", m, c.s.Name(), method, orig, c.name, m)
			}
		}
		for _, p := range r.durationPoints(t) {
			if v, _ := p.Value("http.request.method"); v.AsString() != "_OTHER" {
				t.Errorf("%s: the metric's method is %q", m, v.AsString())
			}
		}
	}
}

// A status error explains itself: no description. The attributes a
// sampler needs are given at the attempt span's creation; server.address
// follows req.Host;
// network.peer.* name the connection; the scope carries a version.
func TestAttemptSpanDetails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }))
	defer srv.Close()
	r := newRig(t, policy.Default())
	req, _ := http.NewRequest("GET", srv.URL+"/missing", nil)
	req.Host = "api.example.test:8443"
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ops, attempts := r.byKind()
	a := attempts[0]
	if a.Status().Code != codes.Error || a.Status().Description != "" {
		t.Errorf("404: status %+v, want Error without a description", a.Status())
	}
	got := map[string]string{}
	for _, k := range []string{"server.address", "server.port", "network.peer.address", "network.peer.port"} {
		got[k], _ = attr(a, k)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	want := map[string]string{"server.address": "api.example.test", "server.port": "8443", "network.peer.address": "127.0.0.1", "network.peer.port": port}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempt attributes (-want +got):\n%s", diff)
	}
	wantStart := []string{"http.request.method", "server.address", "server.port", "url.full"}
	if diff := cmp.Diff(wantStart, r.sampler.keys("GET")); diff != "" {
		t.Errorf("attributes the sampler saw on the attempt (-want +got):\n%s", diff)
	}
	// The operation span is INTERNAL, outside the HTTP conventions: its
	// attributes come at its end, which keeps both spans within
	// otelhttp's one in cost (docs/telemetry.md).
	if keys := r.sampler.keys("retrystack GET"); len(keys) != 0 {
		t.Errorf("attributes the sampler saw on the operation: %v", keys)
	}
	if ops[0].InstrumentationScope().Version == "" {
		t.Error("the instrumentation scope has no version")
	}
}

// Our own histograms have boundaries in their units.
func TestHistogramBuckets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	r := newRig(t, policy.Default())
	resp, err := r.client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{
		"retrystack.client.operation.duration": {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60},
		"retrystack.client.retry.delay":        {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		"retrystack.client.operation.resends":  {0, 1, 2, 3, 4, 5, 10, 20, 50},
	}
	got := map[string][]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch h := m.Data.(type) {
			case metricdata.Histogram[float64]:
				if _, ok := want[m.Name]; ok {
					got[m.Name] = h.DataPoints[0].Bounds
				}
			case metricdata.Histogram[int64]:
				got[m.Name] = h.DataPoints[0].Bounds
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bucket boundaries (-want +got):\n%s", diff)
	}
}

// A redirect loop ends the operation span with an error type that names
// the hop limit.
func TestRedirectLimitErrorType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	defer srv.Close()
	r := newRig(t, policy.Default(), func(c *retrystack.Config) { c.Redirect = redirect.Config{MaxHops: 2} })
	_, err := r.client.Get(srv.URL)
	if _, ok := errors.AsType[*redirect.TooManyHopsError](err); !ok {
		t.Fatalf("error %v", err)
	}
	ops, _ := r.byKind()
	if et, _ := attr(ops[0], "error.type"); et != "redirect-hop-limit" || ops[0].Status().Code != codes.Error {
		t.Errorf("error.type %q, status %v", et, ops[0].Status())
	}
}

// With no Propagator configured, the global one is used once the
// application has set one; TraceContext otherwise.
func TestPropagatorDefault(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent")+"|"+r.Header.Get("Baggage"))
		mu.Unlock()
	}))
	defer srv.Close()
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	send := func() {
		tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		c, _ := retrystack.NewClient(retrystack.Config{Telemetry: tel, Transport: tr})
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send() // the global default injects nothing: TraceContext
	restore := setGlobalPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, fixedBaggage{}))
	send()
	restore()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !strings.HasPrefix(seen[0], "00-") || !strings.HasSuffix(seen[0], "|") || !strings.HasSuffix(seen[1], "|k=v") {
		t.Errorf("headers seen %q: want traceparent alone, then the global propagator's baggage too", seen)
	}
}

// fixedBaggage injects "k=v" as baggage: a propagator to tell apart.
type fixedBaggage struct{}

func (fixedBaggage) Inject(_ context.Context, c propagation.TextMapCarrier) { c.Set("baggage", "k=v") }
func (fixedBaggage) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (fixedBaggage) Fields() []string { return []string{"baggage"} }

// setGlobalPropagator sets otel's global propagator and returns what puts
// back one that injects nothing, as the default does.
func setGlobalPropagator(p propagation.TextMapPropagator) (restore func()) {
	otel.SetTextMapPropagator(p)
	return func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) }
}

// Over HTTP/2 a 204 or a HEAD answer has a body of net/http's own, not
// http.NoBody: it is still known empty, so both spans end at the headers.
func TestEmptyBodiesOverHTTP2EndAtHeaders(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	r := newRig(t, policy.Default(), func(c *retrystack.Config) { c.Transport = srv.Client().Transport })
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(m, srv.URL, nil)
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("spoke %s", resp.Proto)
		}
		ended := len(r.spans.Ended())
		resp.Body.Close()
		if ended%2 != 0 || ended == 0 {
			t.Errorf("%s: %d spans ended before Close, want both of this request's", m, ended)
		}
	}
}

// With error-for-status inside the telemetry layer, the operation span
// still records the status that the error carries.
func TestStatusOfAnErrorForStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }))
	defer srv.Close()
	rec, tel := traced(t)
	s, err := retrystack.NewStack(retrystack.Config{Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.InsertAfter("telemetry", middleware.ErrorForStatus(0)); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if _, err := retrystack.Client(s, tr).Get(srv.URL); err == nil {
		t.Fatal("no error for a 404")
	}
	for _, sp := range rec.Ended() {
		if sp.SpanKind() == trace.SpanKindInternal {
			if code, _ := attr(sp, "http.response.status_code"); code != "404" {
				t.Errorf("operation span status_code %q, want 404", code)
			}
			if et, _ := attr(sp, "error.type"); et != "404" {
				t.Errorf("operation span error.type %q, want 404", et)
			}
		}
	}
}

// traced returns a Telemetry over a recording tracer, shut down when the
// test ends.
func traced(t *testing.T) (*tracetest.SpanRecorder, *telemetry.Telemetry) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return rec, tel
}
