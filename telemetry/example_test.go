package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One operation span and an attempt span per send: a 503 that is retried,
// then a 200.
func Example() {
	srv, _ := faultserver.New()
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
	resp, err := client.Get(srv.URL() + "/fail/1/503")
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
