package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/stores/postgres"
)

// ordersTable makes a table of orders of its own for a test.
func ordersTable(t *testing.T, pool *pgxpool.Pool, extra string) string {
	name := fmt.Sprintf("orders_%d", time.Now().UnixNano())
	if _, err := pool.Exec(context.Background(), `CREATE TABLE `+name+` (id serial PRIMARY KEY, item text NOT NULL`+extra+`)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE `+name) })
	return name
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func send(t *testing.T, url, key, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header
}

func newStore(t *testing.T, pool *pgxpool.Pool) *postgres.Store {
	s, err := postgres.New(context.Background(), pool, "handler_keys")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The handler's write and the record commit together; the handler's own
// choices (a rollback, a commit of its own) and a commit that fails are
// each what the package says.
func TestHandlerTransaction(t *testing.T) {
	pool := testPool(t)
	store := newStore(t, pool)
	// item is unique, checked at commit: a commit that fails.
	orders := ordersTable(t, pool, `, UNIQUE (item) DEFERRABLE INITIALLY DEFERRED`)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		tx, ok := postgres.Tx(r.Context())
		if !ok {
			t.Error("no transaction in the handler's context")
			return
		}
		item, _ := io.ReadAll(r.Body)
		if _, err := tx.Exec(r.Context(), `INSERT INTO `+orders+` (item) VALUES ($1)`, string(item)); err != nil {
			t.Error(err)
		}
		switch string(item) {
		case "rejected": // a check after the write fails: the handler undoes it
			tx.Rollback(r.Context())
			http.Error(w, "rejected", http.StatusUnprocessableEntity)
			return
		case "self-commit":
			if err := tx.Commit(r.Context()); err == nil {
				t.Error("the handler committed the transaction itself")
			}
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "placed "+string(item))
	})
	srv := httptest.NewServer(idempotency.Handler(h, idempotency.Config{Store: store}))
	defer srv.Close()
	key := func(name string) string { return fmt.Sprintf(`"%s-%d"`, name, time.Now().UnixNano()) }

	k := key("placed")
	send(t, srv.URL, k, "book")
	status, body, hdr := send(t, srv.URL, k, "book")
	if status != 201 || body != "placed book" || hdr.Get("Idempotent-Replayed") != "true" || count(t, pool, orders) != 1 {
		t.Errorf("a replay: %d %q %q, %d orders; want the stored answer, one order", status, body, hdr.Get("Idempotent-Replayed"), count(t, pool, orders))
	}

	k = key("rejected")
	send(t, srv.URL, k, "rejected")
	before := runs.Load()
	if status, _, hdr := send(t, srv.URL, k, "rejected"); status != 422 || hdr.Get("Idempotent-Replayed") != "" || runs.Load() != before+1 || count(t, pool, orders) != 1 {
		t.Errorf("after a rollback: %d (replayed %q), run again: %v, %d orders; want no record, the handler run again, no order", status, hdr.Get("Idempotent-Replayed"), runs.Load() == before+1, count(t, pool, orders))
	}

	k = key("self-commit")
	if status, _, _ := send(t, srv.URL, k, "self-commit"); status != 201 || count(t, pool, orders) != 2 {
		t.Errorf("a handler that commits itself: %d, %d orders; want its write committed once, with the record", status, count(t, pool, orders))
	}

	// The commit fails (the deferred unique check): 503, nothing
	// happened, and the retry runs the handler again.
	k = key("commit-fails")
	before = runs.Load()
	status, body, hdr = send(t, srv.URL, k, "book")
	if status != 503 || hdr.Get("Content-Type") != "application/problem+json" || strings.Contains(body, "placed") || count(t, pool, orders) != 2 {
		t.Errorf("a failed commit: %d %q, %d orders; want 503 and no order", status, body, count(t, pool, orders))
	}
	send(t, srv.URL, k, "book")
	if runs.Load() != before+2 {
		t.Errorf("the retry of a failed commit did not run the handler")
	}
}

// PostgreSQL down: 503 before the handler runs, and nothing of the
// store's reaches the client.
func TestDatabaseDown(t *testing.T) {
	testPool(t) // skips without a database, as the others
	u, err := url.Parse(os.Getenv("PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	// A proxy to the database, which the test takes down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			db, err := net.Dial("tcp", u.Host)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, db)
			mu.Unlock()
			go func() { io.Copy(db, c); db.Close() }()
			go func() { io.Copy(c, db); c.Close() }()
		}
	}()
	down := func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	defer down()
	proxied := *u
	proxied.Host = ln.Addr().String()
	pool, err := pgxpool.New(context.Background(), proxied.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := newStore(t, pool)
	var runs atomic.Int32
	var told []error
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
	}), idempotency.Config{Store: store, OnStoreError: func(_ *http.Request, err error) { told = append(told, err) }}))
	defer srv.Close()
	down()
	status, body, _ := send(t, srv.URL, `"k"`, "book")
	if status != 503 || runs.Load() != 0 || strings.Contains(body, "127.0.0.1") || len(told) != 1 {
		t.Errorf("the database down: %d %q, %d runs, hook told %v; want 503 before the handler, no internals", status, body, runs.Load(), told)
	}
}

// A request whose lease ends while its handler runs, its key claimed by a
// retry meanwhile: its commit is refused (503), and the retry's run is the
// one that counts.
func TestLeaseLostMidRequest(t *testing.T) {
	pool := testPool(t)
	store := newStore(t, pool)
	orders := ordersTable(t, pool, "")
	release := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	entered := make(chan string, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := postgres.Tx(r.Context())
		tx.Exec(r.Context(), `INSERT INTO `+orders+` (item) VALUES ('book')`)
		who := r.Header.Get("Who")
		entered <- who
		<-release[who]
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(idempotency.Handler(h, idempotency.Config{Store: store, Lease: 50 * time.Millisecond}))
	defer srv.Close()
	k := fmt.Sprintf(`"lease-%d"`, time.Now().UnixNano())
	do := func(who string) chan int {
		out := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("book"))
			req.Header.Set("Idempotency-Key", k)
			req.Header.Set("Who", who)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- 0
				return
			}
			resp.Body.Close()
			out <- resp.StatusCode
		}()
		return out
	}
	first := do("first")
	<-entered
	var second chan int
	for deadline := time.Now().Add(10 * time.Second); ; { // ask until the lease has ended: no timing asserted
		second = do("second")
		select {
		case <-entered:
		case status := <-second:
			if status != http.StatusConflict || time.Now().After(deadline) {
				t.Fatalf("the second request: %d, want 409 until the lease ends", status)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	close(release["first"])
	if status := <-first; status != http.StatusServiceUnavailable {
		t.Errorf("the first request, whose lease ended: %d, want 503 (its writes not committed)", status)
	}
	close(release["second"])
	if status := <-second; status != http.StatusCreated || count(t, pool, orders) != 1 {
		t.Errorf("the second request: %d, %d orders; want 201 and one order", status, count(t, pool, orders))
	}
}

// New refuses a table name that is not an identifier.
func TestTableName(t *testing.T) {
	pool := testPool(t)
	for _, name := range []string{"", "keys; DROP TABLE x", `"keys"`, "a.b.c", "1keys", strings.Repeat("k", 64)} {
		if _, err := postgres.New(context.Background(), pool, name); err == nil {
			t.Errorf("New(%q) succeeded", name)
		}
	}
	if _, err := postgres.New(context.Background(), pool, "public.named_keys"); err != nil {
		t.Errorf("a schema-qualified name: %v", err)
	}
}

// TestExample runs Example against the database and checks what it
// prints.
func TestExample(t *testing.T) {
	testPool(t)
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	Example()
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if want := "201 placed, replayed: false\n201 placed, replayed: true\norders: 1\n"; string(out) != want {
		t.Errorf("Example printed %q, want %q", out, want)
	}
}

// A handler whose insert fails (the conflict it checks by it) answers with
// its own status without rolling back: that answer is the request's, kept
// and replayed, and the handler runs once. A handler that answers a 5xx
// has its writes rolled back and nothing kept: the retry runs it again.
// A success answered over a failed statement is not believed: 503.
func TestHandlerAnswersAfterAFailedStatement(t *testing.T) {
	pool := testPool(t)
	store := newStore(t, pool)
	orders := ordersTable(t, pool, `, UNIQUE (item)`)
	pool.Exec(context.Background(), `INSERT INTO `+orders+` (item) VALUES ('taken')`)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		tx, _ := postgres.Tx(r.Context())
		item, _ := io.ReadAll(r.Body)
		kind, item2, _ := strings.Cut(string(item), ":")
		_, err := tx.Exec(r.Context(), `INSERT INTO `+orders+` (item) VALUES ($1)`, item2)
		switch {
		case kind == "fails":
			http.Error(w, "the ledger failed", http.StatusInternalServerError)
		case kind == "ignores":
			w.WriteHeader(http.StatusCreated) // the error ignored: a bug
		case err != nil:
			http.Error(w, "an order with that item exists", http.StatusConflict)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})
	srv := httptest.NewServer(idempotency.Handler(h, idempotency.Config{Store: store}))
	defer srv.Close()
	key := func(name string) string { return fmt.Sprintf(`"%s-%d"`, name, time.Now().UnixNano()) }

	k := key("conflict")
	for i := range 3 {
		status, body, hdr := send(t, srv.URL, k, "checks:taken")
		if status != 409 || !strings.Contains(body, "exists") || (i > 0) != (hdr.Get("Idempotent-Replayed") == "true") {
			t.Errorf("try %d: %d %q (replayed %q); want the handler's 409, replayed after the first", i, status, body, hdr.Get("Idempotent-Replayed"))
		}
	}
	if runs.Load() != 1 {
		t.Errorf("the handler ran %d times for one key, want once", runs.Load())
	}

	k = key("fails")
	before := runs.Load()
	send(t, srv.URL, k, "fails:book")
	if status, _, hdr := send(t, srv.URL, k, "fails:book"); status != 500 || hdr.Get("Idempotent-Replayed") != "" || runs.Load() != before+2 || count(t, pool, orders) != 1 {
		t.Errorf("a 5xx: the retry got %d (replayed %q), %d runs, %d orders; want the handler run again and its writes rolled back", status, hdr.Get("Idempotent-Replayed"), runs.Load()-before, count(t, pool, orders))
	}

	if status, _, _ := send(t, srv.URL, key("ignores"), "ignores:taken"); status != 503 {
		t.Errorf("a 201 over a failed insert: %d, want 503 (nothing committed)", status)
	}
}
