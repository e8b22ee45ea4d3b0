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
// Without -otlp the standard OTEL_EXPORTER_OTLP_* variables apply.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/internal/otlp"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
)

func main() {
	endpoint := flag.String("otlp", "", "OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_*)")
	flag.Parse()
	if err := run(context.Background(), *endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "jaeger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, endpoint string) error {
	tp, err := otlp.NewTracerProvider(ctx, "retrystack-example", endpoint)
	if err != nil {
		return err
	}
	defer tp.Shutdown(context.Background()) // flushes the spans

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
