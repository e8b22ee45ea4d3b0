package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/stores/postgres"
)

// The handler writes the order in the request's transaction; the order
// and the stored answer commit together, before the answer goes out. It
// needs a database, so it is compiled, not run: TestExample runs it
// against the one at PG_URL and checks what it prints.
func Example() {
	url := os.Getenv("PG_URL") // postgres://user@127.0.0.1:5432/db
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, url)
	defer pool.Close()
	pool.Exec(ctx, `DROP TABLE IF EXISTS example_orders`)
	pool.Exec(ctx, `CREATE TABLE example_orders (id serial PRIMARY KEY, item text NOT NULL)`)
	// snippet: safe-writes-postgres
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := postgres.Tx(r.Context()) // the transaction the record commits in
		item, _ := io.ReadAll(r.Body)
		if _, err := tx.Exec(r.Context(), `INSERT INTO example_orders (item) VALUES ($1)`, string(item)); err != nil {
			http.Error(w, "could not place the order", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "placed")
	})
	store, err := postgres.New(ctx, pool, "example_keys")
	if err != nil {
		fmt.Println(err)
		return
	}
	handler := idempotency.Handler(orders, idempotency.Config{Store: store})
	// end snippet
	srv := httptest.NewServer(handler)
	defer srv.Close()

	key := fmt.Sprintf(`"order-%d"`, time.Now().UnixNano()) // a new order: a key of its own
	for range 2 {                                           // the second as a retry whose first answer was lost
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("book"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s, replayed: %v\n", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	var n int
	pool.QueryRow(ctx, `SELECT count(*) FROM example_orders`).Scan(&n)
	fmt.Println("orders:", n)
}
