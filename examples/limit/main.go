// Command limit puts a concurrency limit of 4 requests per host inside
// the retry layer, sends 40 requests at once to a service that takes
// 20 ms each, and prints the most the service held at once; then a
// request that finds no room within its 10 ms deadline, refused with the
// limit's own stop reason, nothing sent.
//
//	go run ./examples/limit
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/policy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limit:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	// The service: counts what it holds at once.
	var in, most, seen atomic.Int32
	hold, holding := make(chan struct{}), make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		n := in.Add(1)
		defer in.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Path == "/hold" {
			holding <- struct{}{}
			<-hold
		} else {
			<-time.After(20 * time.Millisecond) // the service's work
		}
		io.WriteString(rw, "ok")
	}))
	defer srv.Close()

	p := policy.Default()
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p})
	if err != nil {
		return err
	}
	// Inside the retry layer: a refusal stops the operation with its
	// reason. (Below a hedge layer, if you have one: hedges count.)
	stack, err = stack.InsertAfter("retry", limit.Layer(limit.Config{Limit: 4}))
	if err != nil {
		return err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := retrystack.Client(stack, tr)
	fmt.Fprintln(w, stack)

	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 40 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(w, "40 GETs at once: %d answered, the service held at most %d at once\n", ok.Load(), most.Load())

	// Four requests hold every place; a fifth with a 10 ms deadline waits,
	// then is refused.
	before := seen.Load()
	var holders sync.WaitGroup
	for range 4 {
		holders.Go(func() {
			if resp, err := client.Get(srv.URL + "/hold"); err == nil {
				resp.Body.Close()
			}
		})
	}
	for range 4 {
		<-holding // the four are at the service
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/late", nil)
	_, err = client.Do(req)
	var e *engine.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("the fifth request: %v", err)
	}
	fmt.Fprintf(w, "a fifth, 10 ms deadline: stop %s, sent to the service: %d\n", e.Report.Stop, seen.Load()-before-4)
	close(hold)
	holders.Wait()
	return nil
}
