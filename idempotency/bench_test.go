package idempotency_test

import (
	"testing"

	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/storebench"
)

// BenchmarkHandler measures the middleware with the in-memory store
// (docs/benchmarks.md).
func BenchmarkHandler(b *testing.B) {
	storebench.Benchmark(b, func(testing.TB) idempotency.Store { return idempotency.NewMemoryStore(0, nil) }, nil)
}
