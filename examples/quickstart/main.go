// snippet: quickstart
// Command quickstart is README's first program: a client that retries and traces its calls.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	exporter, err := otlptracehttp.New(context.Background(), // to OTEL_EXPORTER_OTLP_ENDPOINT, or localhost:4318
		otlptracehttp.WithTimeout(5*time.Second), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{}))
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	defer tp.Shutdown(context.Background()) // flushes the spans: at most 5 s, no retries
	tel, _ := telemetry.New(telemetry.Config{TracerProvider: tp})
	client, _ := retrystack.NewClient(retrystack.Config{Telemetry: tel}) // retries by policy.Default()

	resp, err := client.Get(os.Args[1])
	if err != nil {
		log.Print(err, engine.ReportFrom(err)) // attempts, statuses, waits, stop reason
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status, engine.ReportOf(resp)) // 200 OK default: 2 attempts [503 200], waits [77ms], success
}

// end snippet
