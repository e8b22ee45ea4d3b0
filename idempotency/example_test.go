package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/retrystack/retrystack/idempotency"
)

// ledger is the service's own database: an order and its idempotency key
// are written together, the key unique.
type ledger struct {
	mu     sync.Mutex
	byKey  map[string]int
	orders int
}

// place writes an order for key once, in one transaction with the key.
func (l *ledger) place(key string) (order int, created bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.byKey[key]; ok {
		return n, false // the effect is already there: answer with it
	}
	l.orders++
	l.byKey[key] = l.orders
	return l.orders, true
}

// The middleware replays stored answers; the handler makes the key part of
// its own write, so even a duplicate the store cannot answer (the
// instance crashed between the write and storing the answer; here a second
// instance with a store of its own) does not place the order twice.
func ExampleKeyOf() {
	db := &ledger{byKey: map[string]int{}}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _ := idempotency.KeyOf(r.Context())
		order, created := db.place(key)
		if created {
			w.WriteHeader(http.StatusCreated)
		}
		fmt.Fprintf(w, "order %d", order)
	})
	first := httptest.NewServer(idempotency.Handler(orders, idempotency.Config{}))
	defer first.Close()
	other := httptest.NewServer(idempotency.Handler(orders, idempotency.Config{})) // its store knows nothing
	defer other.Close()

	for _, url := range []string{first.URL, first.URL, other.URL} {
		req, _ := http.NewRequest("POST", url, strings.NewReader("one book"))
		req.Header.Set("Idempotency-Key", `"3f2b7c1e-9d4a-4f6b-8e21-5a0c9d7e4b13"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s, replayed: %v\n", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("orders placed:", db.orders)
	// Output:
	// 201 order 1, replayed: false
	// 201 order 1, replayed: true
	// 200 order 1, replayed: false
	// orders placed: 1
}

// Keys scoped per principal: two accounts that send the same key, target
// and body are two requests, and neither gets the other's answer. The
// principal is what the authentication in front of the handler found
// (here a header a test sets), never a secret.
func ExampleConfig_principal() {
	placed := 0
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		placed++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d for %s", placed, r.Header.Get("Account"))
	})
	srv := httptest.NewServer(idempotency.Handler(orders, idempotency.Config{
		Principal: func(r *http.Request) string { return r.Header.Get("Account") },
	}))
	defer srv.Close()

	for _, account := range []string{"alice", "bob", "alice"} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("one book"))
		req.Header.Set("Idempotency-Key", `"order-1"`) // the same key
		req.Header.Set("Account", account)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %s, replayed: %v\n", account, body, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// alice: order 1 for alice, replayed: false
	// bob: order 2 for bob, replayed: false
	// alice: order 1 for alice, replayed: true
}
