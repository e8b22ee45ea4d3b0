// Command jaeger sends a few requests with retries and redirects through
// the default stack with telemetry, and exports the traces over OTLP/HTTP:
// each logical operation is one tree in Jaeger, a child span per attempt.
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
// Without -otlp the standard OTEL_EXPORTER_OTLP_* variables apply. At
// exit the spans get a few seconds to reach the collector; a collector
// that takes none in that time (one that accepts connections and never
// answers) does not hold the program: it says how many spans it dropped.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/internal/otlp"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/sdk/trace"
)

// flushWithin bounds the export of the spans at exit.
const flushWithin = 3 * time.Second

func main() {
	endpoint := flag.String("otlp", "", "OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_*)")
	flag.Parse()
	if err := run(context.Background(), *endpoint, flushWithin); err != nil {
		fmt.Fprintln(os.Stderr, "jaeger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, endpoint string, within time.Duration) (err error) {
	tp, err := otlp.NewTracerProvider(ctx, "retrystack-example", endpoint)
	if err != nil {
		return err
	}
	ended := new(counter)
	tp.RegisterSpanProcessor(ended)
	defer func() {
		// Flushes the spans, for a few seconds at most.
		sctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		if serr := tp.Shutdown(sctx); serr != nil && err == nil {
			err = fmt.Errorf("the collector took no spans within %v: up to %d span(s) of this run dropped: %w", within, ended.n.Load(), serr)
		}
	}()

	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		return err
	}
	srv, err := faultserver.New()
	if err != nil {
		return err
	}
	defer srv.Close()

	p := policy.Default()
	p.Backoff.Base = 20 * time.Millisecond // short, but visible between the attempt spans
	client, err := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel})
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()

	for _, path := range []string{
		"/fail/2/503",                    // two retries, then 200
		"/fail/1/503?then=302&to=/s/200", // 503 → 302 → 200: resend_count 1, 2
		"/s/503",                         // exhausted: the Ok(503) pitfall event
	} {
		resp, err := client.Get(srv.URL() + path)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rep := engine.ReportOf(resp)
		fmt.Printf("GET %-32s %d  %d attempt(s) on the last hop, %s\n", path, resp.StatusCode, len(rep.Attempts), rep.Stop)
	}
	return nil
}

// counter counts the spans that ended: what the exporter had to send.
type counter struct{ n atomic.Int64 }

func (c *counter) OnStart(context.Context, trace.ReadWriteSpan) {}
func (c *counter) OnEnd(trace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *counter) Shutdown(context.Context) error               { return nil }
func (c *counter) ForceFlush(context.Context) error             { return nil }
