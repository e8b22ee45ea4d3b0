package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/idempotency/storetest"
	"github.com/retrystack/retrystack/stores/postgres"
)

// testPool connects to the PostgreSQL at PG_URL (.ci/run starts one, see
// scripts/postgres-store-test.sh). Without PG_URL the test is skipped,
// unless PG_REQUIRED is set, as .ci/run sets it.
func testPool(t testing.TB) *pgxpool.Pool {
	url := os.Getenv("PG_URL")
	if url == "" {
		if os.Getenv("PG_REQUIRED") != "" {
			t.Fatal("PG_REQUIRED is set but PG_URL is not")
		}
		t.Skip("set PG_URL to a PostgreSQL database (.ci/run starts one)")
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("PostgreSQL at %s: %v", url, err)
	}
	return pool
}

func TestConformance(t *testing.T) {
	pool := testPool(t)
	s, err := postgres.New(context.Background(), pool, "storetest_keys")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(*testing.T) idempotency.Store { return s })
}
