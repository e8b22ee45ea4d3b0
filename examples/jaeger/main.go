// Command jaeger sends a few requests with retries and redirects through
// the default stack with telemetry, and exports the traces over OTLP/HTTP
// with OpenTelemetry's own exporter (otlptracehttp): each logical
// operation is one tree in Jaeger, a child span per attempt. Copy it: it
// imports only retrystack's public packages and OpenTelemetry's.
//
// Start Jaeger (scripts/jaeger-e2e.sh shows how to build and start it on
// 127.0.0.1), then:
//
//	go run ./examples/jaeger -otlp http://127.0.0.1:4318
//
// then read the traces of service "retrystack-example": from the JSON API,
//
//	curl '127.0.0.1:16686/api/traces?service=retrystack-example'
//
// or in the web UI at http://127.0.0.1:16686, which a Jaeger built from
// source serves only when started with a UI build
// (--set extensions.jaeger_query.ui.assets_path=DIR; docs/telemetry.md).
// Without -otlp the standard OTEL_EXPORTER_OTLP_* variables apply.
//
// The requests go to a server in the program (a few lines of net/http
// that fail the way a busy service does); point them at your own with
// -target.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
)

func main() {
	endpoint := flag.String("otlp", "", "OTLP/HTTP base URL, e.g. http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_*)")
	target := flag.String("target", "", "base URL of a server with the paths /twice-503, /503-then-redirect, /always-503 (default: one in the program)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *endpoint, *target, 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "jaeger:", err)
		os.Exit(1)
	}
}

// run sends the requests and exports their spans to endpoint, waiting at
// most flush for the exporter when it ends.
func run(ctx context.Context, w io.Writer, endpoint, target string, flush time.Duration) (err error) {
	// snippet: jaeger-exporter
	var opts []otlptracehttp.Option
	if endpoint != "" { // e.g. http://127.0.0.1:4318
		// WithEndpointURL posts to exactly the URL it is given: a base URL
		// alone sends the spans to "/", which Jaeger answers 404. (Its
		// sibling WithEndpoint takes only "host:port" and adds /v1/traces
		// itself; plain HTTP then needs WithInsecure.)
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	}
	exporter, err := otlptracehttp.New(ctx, opts...) // with no options: the OTEL_EXPORTER_OTLP_* variables
	if err != nil {
		return err
	}
	// end snippet
	counted, ended := &countingExporter{SpanExporter: exporter}, &endedSpans{}
	res, err := resource.Merge(resource.Default(),
		resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("retrystack-example")))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(counted), sdktrace.WithSpanProcessor(ended), sdktrace.WithResource(res))
	// snippet: jaeger-shutdown
	defer func() {
		// Flush, for a bounded time: a collector that accepts connections
		// and never answers would hold Shutdown for the exporter's own
		// timeouts and retries (half a minute and more).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flush)
		defer cancel()
		if shutErr := tp.Shutdown(ctx); shutErr != nil {
			lost := ended.n.Load() - counted.exported.Load()
			fmt.Fprintf(w, "%d of %d spans not exported, dropped: %v\n", lost, ended.n.Load(), shutErr)
			err = errors.Join(err, shutErr)
		}
	}()
	// end snippet

	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		return err
	}
	if target == "" {
		srv := flakyServer()
		defer srv.Close()
		target = srv.URL
	}
	p := policy.Default()
	p.Backoff.Base = 20 * time.Millisecond // short, but visible between the attempt spans
	// Default's budget holds 2 retries at once and earns one back per 5
	// successes: this demo's server fails most of what it is sent, so
	// its client holds 4.
	if p.Budget, err = policy.NewEarnedBudget(0.2, 4); err != nil {
		return err
	}
	client, err := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel})
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()

	for _, path := range []string{
		"/twice-503",         // two retries, then 200
		"/503-then-redirect", // 503 → 302 → 200: resend_count 1, 2
		"/always-503",        // exhausted: the Ok(503) pitfall event
	} {
		resp, err := client.Get(target + path)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rep := engine.ReportOf(resp)
		fmt.Fprintf(w, "GET %-18s %d  %d attempt(s) on the last hop, %s\n", path, resp.StatusCode, len(rep.Attempts), rep.Stop)
	}
	return nil
}

// countingExporter counts the spans its exporter took.
type countingExporter struct {
	sdktrace.SpanExporter
	exported atomic.Int64
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.exported.Add(int64(len(spans)))
	}
	return err
}

// endedSpans counts the spans that ended, exported or not.
type endedSpans struct{ n atomic.Int64 }

func (e *endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e *endedSpans) OnEnd(sdktrace.ReadOnlySpan)                     { e.n.Add(1) }
func (e *endedSpans) Shutdown(context.Context) error                  { return nil }
func (e *endedSpans) ForceFlush(context.Context) error                { return nil }

// flakyServer fails the way a busy service does: /twice-503 answers 503
// twice, then 200; /503-then-redirect 503 once, then a redirect to /ok;
// /always-503 always 503.
func flakyServer() *httptest.Server {
	var mu sync.Mutex
	seen := map[string]int{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/always-503", r.URL.Path == "/twice-503" && n <= 2, r.URL.Path == "/503-then-redirect" && n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/503-then-redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			io.WriteString(w, "ok")
		}
	}))
}
