//go:build otlp

package main

import (
	"context"

	"github.com/retrystack/retrystack/internal/testkit/otlp"
	"go.opentelemetry.io/otel/trace"
)

// With -tags otlp the lab can export its traces (-otlp URL).
func init() {
	exportTraces = func(ctx context.Context, endpoint string) (trace.TracerProvider, func(context.Context) error, error) {
		tp, err := otlp.NewTracerProvider(ctx, "retrylab", endpoint)
		if err != nil {
			return nil, nil, err
		}
		return tp, tp.Shutdown, nil
	}
}
