package telemetry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// Both layers keep the RoundTripper contract, with spans recorded and with
// a tracer that records nothing (their paths differ).
func TestLayersObeyContract(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer tp.Shutdown(context.Background())
	for name, cfg := range map[string]telemetry.Config{
		"recording": {TracerProvider: tp},
		"no-op":     {TracerProvider: noop.NewTracerProvider()},
	} {
		tel, err := telemetry.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []middleware.Layer{tel.Operation(), tel.Attempt()} {
			t.Run(name+"/"+l.Name, func(t *testing.T) {
				rttest.Contract(t, func(next http.RoundTripper) http.RoundTripper { return l.Wrap(next) })
			})
		}
	}
}
