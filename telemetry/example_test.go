package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// failOnce answers 503 to its first request, then 200.
func failOnce() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
}

// One operation span and an attempt span per send: a 503 that is retried,
// then a 200.
func Example() {
	srv := failOnce()
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel, _ := telemetry.New(telemetry.Config{TracerProvider: tp})

	p := policy.Default()
	p.Backoff.Base = 1 // keep the example fast
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, _ := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel, Transport: tr})
	fmt.Println(client.Transport)
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the spans end with the body

	spans := rec.Ended()
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for _, s := range spans {
		fmt.Println(s.SpanKind(), s.Name(), s.Status().Code)
	}
	// Output:
	// telemetry → redirect → cookies → retry → attempt-telemetry → transport
	// internal retrystack GET Unset
	// client GET Error
	// client GET Unset
}

// The options otelhttp users know: a span name of your own, requests left
// untraced, and attributes of your own on the operation span and the
// metrics.
func ExampleConfig() {
	srv := failOnce()
	defer srv.Close()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	route := func(r *http.Request) string { return r.URL.Path } // yours: a route, never a URL with IDs
	// snippet: telemetry-options
	tel, err := telemetry.New(telemetry.Config{
		TracerProvider: tp,
		// otelhttp.WithSpanNameFormatter: the operation span's name.
		SpanName: func(r *http.Request) string { return r.Method + " " + route(r) },
		// otelhttp.WithFilter: health checks untraced and unmeasured.
		Filter: func(r *http.Request) bool { return r.URL.Path != "/healthz" },
		// otelhttp's Labeler and WithMetricAttributesFn: on the operation
		// span and the metrics.
		Attributes: func(r *http.Request) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("tenant", r.Header.Get("X-Tenant"))}
		},
	})
	// end snippet
	if err != nil {
		fmt.Println(err)
		return
	}
	p := policy.Default()
	p.Backoff.Base = 1 // keep the example fast
	client, _ := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel})
	defer client.CloseIdleConnections()
	for _, path := range []string{"/healthz", "/orders"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for _, s := range spans.GetSpans() { // /healthz's two attempts left none
		line := s.SpanKind.String() + " " + s.Name
		for _, kv := range s.Attributes {
			if kv.Key == "tenant" {
				line += " tenant=" + kv.Value.AsString()
			}
		}
		fmt.Println(line)
	}
	// Output:
	// client GET
	// internal GET /orders tenant=acme
}
