package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/crashtest"
	"github.com/retrystack/retrystack/stores/postgres"
)

// A keyed POST whose server process dies (SIGKILL) at the worst moments,
// then starts again, while a retrystack client retries it: the order is
// placed once.
//
//   - after-commit: the order and the record committed, the answer never
//     sent. The retry gets the stored answer.
//   - before-commit: the order written in the transaction, not
//     committed. PostgreSQL rolls it back; the claim holds the key until
//     its lease ends (the client asks again meanwhile), then the retry
//     places the order.
func TestCrash(t *testing.T) {
	if crashtest.IsChild() {
		serveOrders(t)
		return
	}
	pool := testPool(t)
	for _, at := range []string{"after-commit", "before-commit"} {
		t.Run(at, func(t *testing.T) {
			run := fmt.Sprintf("%s-%d", at, time.Now().UnixNano())
			srv := crashtest.Start(t, "TestCrash", "CRASH_AT="+at, "CRASH_RUN="+run)
			done := srv.Post("/orders", `{"item":"book","run":"`+run+`"}`)
			if at == "after-commit" {
				srv.Await("committed")
			} else {
				srv.Await("written")
			}
			srv.Crash()
			srv.Restart("CRASH_RUN=" + run)
			r := <-done
			var orders int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM crash_orders WHERE run = $1`, run).Scan(&orders); err != nil {
				t.Fatal(err)
			}
			if r.Err != nil || r.Status != http.StatusCreated || orders != 1 {
				t.Fatalf("%d %q %v (%v); %d orders: want 201 and one order", r.Status, r.Body, r.Err, r.Report, orders)
			}
			if replayed := at == "after-commit"; r.Report == nil || r.Report.Replayed != replayed {
				t.Errorf("report %v: want Replayed %v", r.Report, replayed)
			}
		})
	}
}

// serveOrders is the child: an orders service whose order and record
// commit together, dying where CRASH_AT says on its first request.
func serveOrders(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS crash_orders (id serial PRIMARY KEY, run text NOT NULL, item text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.New(ctx, pool, "crash_keys")
	if err != nil {
		t.Fatal(err)
	}
	at := os.Getenv("CRASH_AT")
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := postgres.Tx(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO crash_orders (run, item) VALUES ($1, 'book')`, os.Getenv("CRASH_RUN")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if at == "before-commit" {
			fmt.Println("written")
			select {} // killed here
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"order":"placed"}`)
	})
	var s idempotency.Store = store
	if at == "after-commit" {
		s = dieAfterCommit{store}
	}
	t.Fatal(crashtest.Serve(idempotency.Handler(orders, idempotency.Config{Store: s, Lease: time.Second})))
}

// dieAfterCommit's claims commit, then the process waits to be killed
// before its answer goes out.
type dieAfterCommit struct{ *postgres.Store }

func (s dieAfterCommit) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	c, rec, err := s.Store.Begin(ctx, key, fp, lease)
	if c != nil {
		c = dyingClaim{c}
	}
	return c, rec, err
}

type dyingClaim struct{ idempotency.Claim }

func (c dyingClaim) Complete(ctx context.Context, rec *idempotency.Record, keep time.Duration) error {
	if err := c.Claim.Complete(ctx, rec, keep); err != nil {
		return err
	}
	fmt.Println("committed")
	select {} // killed here
}
