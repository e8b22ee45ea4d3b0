package postgres_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/storebench"
	"github.com/retrystack/retrystack/stores/postgres"
)

// BenchmarkHandler measures the middleware with this store, the handler
// inserting one order through the request's transaction
// (docs/benchmarks.md).
func BenchmarkHandler(b *testing.B) {
	pool := testPool(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_orders (id bigserial PRIMARY KEY, item text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, "bench_keys")
	if err != nil {
		b.Fatal(err)
	}
	storebench.Benchmark(b, func(testing.TB) idempotency.Store { return store }, func(r *http.Request) error {
		tx, _ := postgres.Tx(r.Context())
		_, err := tx.Exec(r.Context(), `INSERT INTO bench_orders (item) VALUES ('book')`)
		return err
	})
}
