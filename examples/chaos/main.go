// Command chaos injects faults below the retry layer of a client and
// shows what the retry layer makes of them: injected 503s on a third of
// the sends (seeded: the same on every run), retried as real ones; and a
// connection reset after a POST reached the server, which, with an
// Idempotency-Key and a server that speaks the idempotency protocol, is
// resolved by a resend that gets the first answer: the order is written
// once. Every injection is an event marked injected.
//
//	go run ./examples/chaos
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// injections counts the events that say a fault was injected.
type injections struct {
	mu     sync.Mutex
	byKind map[string]int
}

func (c *injections) Observe(e middleware.Event) {
	if e.Name != middleware.EventChaos {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range e.Attrs {
		if a.Key == "retrystack.chaos.fault" {
			c.byKind[a.Value.AsString()]++
		}
	}
}

// observing is a layer that shows each operation's events to o.
func observing(o middleware.Observer) middleware.Layer {
	return middleware.Layer{Name: "observe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if op, ok := middleware.OperationOf(req.Context()); ok {
				op.Observe(o)
			}
			return next.RoundTrip(req)
		})
	}}
}

func run(w io.Writer) error {
	var gets, orders atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items", func(rw http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		io.WriteString(rw, "[]")
	})
	// The server half of safe writes: a resend with the same key gets the
	// stored answer, and the handler runs once.
	mux.Handle("POST /orders", idempotency.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := orders.Add(1)
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprintf(rw, "order %d", n)
	}), idempotency.Config{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	p := policy.Default()
	p.Backoff = policy.Backoff{} // no waits, for the example
	p.IdempotencyKeys = true     // a key for each POST, the same on every attempt
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p})
	if err != nil {
		return err
	}
	seen := &injections{byKind: map[string]int{}}
	stack, err = stack.InsertAfter("retry", chaos.Layer(chaos.Config{
		Seed: 7, // the same faults on every run
		Faults: []chaos.Fault{
			// A third of the GETs' sends: more than Default's budget (one
			// retry per five successes) pays for, so a few GETs end 503.
			{Kind: chaos.Status, Status: http.StatusServiceUnavailable, Rate: 1.0 / 3, Methods: []string{"GET"}},
			{Kind: chaos.Reset, Rate: 1, Methods: []string{"POST"}, Attempts: 1}, // the first send of each POST
		},
	}))
	if err == nil {
		stack, err = stack.InsertBefore("redirect", observing(seen))
	}
	if err != nil {
		return err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := retrystack.Client(stack, tr)
	fmt.Fprintln(w, stack)

	ok, attempts := 0, 0
	for range 30 {
		resp, err := client.Get(srv.URL + "/items")
		if err != nil {
			fmt.Fprintln(w, "GET:", err)
			continue
		}
		resp.Body.Close()
		attempts += len(engine.ReportOf(resp).Attempts)
		if resp.StatusCode == 200 {
			ok++
		}
	}
	fmt.Fprintf(w, "30 GETs: %d answered 200 in %d attempts; %d injected 503s; the server saw %d\n", ok, attempts, seen.byKind["status"], gets.Load())

	resp, err := client.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"item":1}`))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Fprintf(w, "POST reset after it was sent (%d injected): %d %q, replayed: %q; orders written: %d\n",
		seen.byKind["reset"], resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"), orders.Load())
	return nil
}
