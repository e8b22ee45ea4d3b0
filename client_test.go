package retrystack_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// redirectToFlaky is the Examples' server: /old redirects to /new, which
// answers 503 once, then 200.
func redirectToFlaky() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/old":
			http.Redirect(w, r, "/new", http.StatusFound)
		case n.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
}

func Example() {
	srv := redirectToFlaky()
	defer srv.Close()

	p := policy.Default()
	p.Backoff.Base = 1 // keep the example fast
	client, err := retrystack.NewClient(retrystack.Config{Policy: &p})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.CloseIdleConnections()
	fmt.Println(client.Transport)

	// A redirect to a flaky page: each hop passes through cookies and retry.
	resp, err := client.Get(srv.URL + "/old")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	rep := engine.ReportOf(resp)
	fmt.Println(resp.StatusCode, rep.Stop, len(rep.Attempts), "attempts on the last hop")
	// Output:
	// redirect → cookies → retry → transport
	// 200 success 2 attempts on the last hop
}

func TestNewClient(t *testing.T) {
	c, err := retrystack.NewClient(retrystack.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Jar != nil {
		t.Error("the client's own jar is set: cookies would be handled twice")
	}
	if err := c.CheckRedirect(nil, nil); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("CheckRedirect = %v: redirects would be followed twice", err)
	}

	bad := policy.Default()
	bad.MaxAttempts = 0
	_, err = retrystack.NewClient(retrystack.Config{Policy: &bad})
	var ce *policy.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("bad policy: %v, want a *policy.ConfigError", err)
	}
}

// Every hop of a redirect chain is numbered in one sequence, retries and
// hops alike, and shares the client's budget.
func TestSendsAcrossHops(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var resends []int
	p := policy.Default()
	p.Backoff.Base = 1
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Hooks: engine.Hooks{
		OnAttempt: func(ev engine.Event) { resends = append(resends, ev.Attempt.Resend) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL() + "/redirect/307/1?to=/fail/2/503")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if fmt.Sprint(resends) != "[0 1 2 3]" {
		t.Errorf("resend numbers %v, want [0 1 2 3]", resends)
	}
}

// NewTransport retries under a client of your own (or an SDK's): the
// client follows the redirect, and each hop is retried on its own.
func ExampleNewTransport() {
	srv := redirectToFlaky()
	defer srv.Close()

	p := policy.Default()
	p.Backoff.Base = 1 // keep the example fast
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	fmt.Println(rt)

	resp, err := client.Get(srv.URL + "/old")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	rep := engine.ReportOf(resp)
	fmt.Println(resp.StatusCode, rep.Stop, len(rep.Attempts), "attempts on the last hop")
	// Output:
	// retry → transport
	// 200 success 2 attempts on the last hop
}

// A command-line program is a client alone: policy.Alone() retries an
// attempt that timed out, where policy.Default(), which keeps a fleet of
// small clients off a slow service, stops timeout-not-retried.
func Example_alone() {
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !first.Swap(true) {
			<-r.Context().Done() // the first request stalls until the client gives up
		}
	}))
	defer srv.Close()

	for _, p := range []policy.Policy{policy.Default(), policy.Alone()} {
		first.Store(false)
		p.AttemptTimeout = 100 * time.Millisecond
		p.Backoff.Base = 1 // keep the example fast
		client, _ := retrystack.NewClient(retrystack.Config{Policy: &p})
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(p.Name, engine.ReportFrom(err).Stop)
		} else {
			resp.Body.Close()
			fmt.Println(p.Name, engine.ReportOf(resp).Stop, len(engine.ReportOf(resp).Attempts), "attempts")
		}
		client.CloseIdleConnections()
	}
	// Output:
	// default timeout-not-retried
	// alone success 2 attempts
}
