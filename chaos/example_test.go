package chaos_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A chaos layer below the retry layer answers the first attempt of each
// operation with a 503 it makes up, sending nothing: the retry layer
// retries it as it would a real one, and the server sees one request.
// The injection is an event of the operation, marked injected.
func ExampleLayer() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	p := policy.Default()
	p.Backoff = policy.Backoff{} // no waits, for the example
	e, _ := engine.New(engine.Config{Policy: p})
	stack, err := middleware.NewStack(e.Layer(), chaos.Layer(chaos.Config{
		Seed: 1,
		Faults: []chaos.Fault{{
			Kind: chaos.Status, Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"0"}},
			Rate: 1, Attempts: 1, // every operation's first attempt
		}},
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: stack.Then(tr)}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	rep := engine.ReportOf(resp)
	fmt.Println(stack)
	fmt.Println(resp.StatusCode, rep.Stop, len(rep.Attempts), "attempts;", seen.Load(), "request at the server")

	// A zero Config injects nothing, and says so.
	_, err = middleware.NewStack(chaos.Layer(chaos.Config{}))
	if ce, ok := errors.AsType[*policy.ConfigError](err); ok {
		fmt.Println(ce.Field+":", ce.Reason)
	}
	// Output:
	// retry → chaos → transport
	// 200 success 2 attempts; 1 request at the server
	// chaos.Config.Faults: no fault can fire: none is configured
}
