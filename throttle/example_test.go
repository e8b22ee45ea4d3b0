package throttle_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// While a host rejects what it is sent, the throttle refuses requests
// locally, nothing sent, with the stop reason throttled. A host is judged
// once it has been sent 10 requests in the window; Rand fixed at 0 makes
// every refusal the formula allows certain.
func ExampleLayer() {
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // overloaded
	}))
	defer srv.Close()

	p := policy.Never() // no retries: one request each
	stack, _ := retrystack.NewStack(retrystack.Config{Policy: &p})
	stack, err := stack.InsertAfter("retry", throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := retrystack.Client(stack, nil)
	defer client.CloseIdleConnections()
	stops := map[policy.StopReason]int{}
	for range 20 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			stops[engine.ReportFrom(err).Stop]++
			continue
		}
		resp.Body.Close()
		stops[engine.ReportOf(resp).Stop]++
	}
	fmt.Println("the server received", received.Load(), "of 20")
	fmt.Println(stops)
	// Output:
	// the server received 10 of 20
	// map[non-retryable:10 throttled:10]
}
