package breaker_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A breaker outside the retry layer counts operations: after two failed
// operations it fails the next one at once. (The second operation makes one
// attempt: the first spent the retries Default's budget holds at once.)
func ExampleLayer() {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()

	p := policy.Default()
	p.Backoff = policy.Backoff{} // no waits, for the example
	e, _ := engine.New(engine.Config{Policy: p})
	stack, _ := middleware.NewStack(breaker.Layer(breaker.Config{Consecutive: 2}), e.Layer())
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: stack.Then(tr)}

	for range 3 {
		resp, err := client.Get(down.URL)
		var open *breaker.OpenError
		switch {
		case errors.As(err, &open):
			fmt.Println("failed fast: nothing sent")
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.StatusCode, engine.ReportOf(resp).Stop)
		}
	}
	// Output:
	// 503 attempts-exhausted
	// 503 budget-exhausted
	// failed fast: nothing sent
}
