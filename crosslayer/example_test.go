package crosslayer_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// A service in front of an overloaded one: its own client retries, gives
// up, and its answer tells the caller not to retry; the caller's client
// obeys. The bottom service sees 3 requests, not 9.
func ExampleHandler() {
	var bottomRequests atomic.Int32
	bottom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bottomRequests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer bottom.Close()

	client, _ := retrystack.NewClient(retrystack.Config{}) // policy.Default(): 3 attempts
	defer client.CloseIdleConnections()
	middle := httptest.NewServer(crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", bottom.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}), crosslayer.Config{}))
	defer middle.Close()

	// The caller speaks the protocol with the services of its chain (here
	// on 127.0.0.1), never with a third party.
	caller, _ := retrystack.NewClient(retrystack.Config{Signals: crosslayer.Signals{To: &policy.Scope{Hosts: []string{"127.0.0.1"}}}})
	defer caller.CloseIdleConnections()
	resp, err := caller.Get(middle.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Retrystack-Should-Retry"), engine.ReportOf(resp).Stop)
	fmt.Println("bottom requests:", bottomRequests.Load())
	// Output:
	// 503 false pushback
	// bottom requests: 3
}
