package engine_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// The retry layer in a client: the server fails twice, the third attempt
// succeeds, and the report says what happened on the wire.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	p := policy.Default()
	p.Backoff.Base = 1 // keep the example fast
	e, err := engine.New(engine.Config{Policy: p})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: e.Layer().Wrap(nil)}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	rep := engine.ReportOf(resp)
	for i, a := range rep.Attempts {
		fmt.Println("attempt", i+1, a.Status)
	}
	fmt.Println(resp.StatusCode, rep.Stop)
	// Output:
	// attempt 1 503
	// attempt 2 503
	// attempt 3 200
	// 200 success
}
