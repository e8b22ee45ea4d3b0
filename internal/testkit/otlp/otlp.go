// Package otlp wires OpenTelemetry's OTLP/HTTP trace exporter for
// retrystack users and the lab: spans go to Jaeger or any collector.
package otlp

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// NewTracerProvider returns a tracer provider that batches spans to an
// OTLP/HTTP endpoint under the given service name. The exporter reads the
// standard OTEL_EXPORTER_OTLP_* variables; endpoint, when not empty,
// overrides them: a base URL such as http://127.0.0.1:4318, to which
// /v1/traces is added, or a full traces URL. Shut the provider down to
// flush.
func NewTracerProvider(ctx context.Context, service, endpoint string) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	if endpoint != "" {
		if !strings.HasSuffix(endpoint, "/v1/traces") {
			endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service)))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
