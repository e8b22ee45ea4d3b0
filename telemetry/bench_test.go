package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/telemetry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkTelemetry compares the default stack without telemetry, with
// no-op providers (the layers must cost next to nothing), and with a
// recording SDK tracer whose spans go nowhere.
func BenchmarkTelemetry(b *testing.B) {
	srv, err := faultserver.New()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	noop, _ := telemetry.New(telemetry.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	recording, _ := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()})
	for _, c := range []struct {
		name string
		tel  *telemetry.Telemetry
	}{{"off", nil}, {"noop", noop}, {"recording", recording}} {
		b.Run(c.name, func(b *testing.B) {
			client, err := retrystack.NewClient(retrystack.Config{Telemetry: c.tel, Transport: &http.Transport{}})
			if err != nil {
				b.Fatal(err)
			}
			defer client.CloseIdleConnections()
			url := srv.URL() + "/s/200?size=64"
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
