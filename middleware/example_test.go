package middleware_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// trace is a layer that prints when a request enters and leaves it.
func trace(name string) middleware.Layer {
	return middleware.Layer{Name: name, Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			fmt.Println("→", name)
			resp, err := next.RoundTrip(req)
			fmt.Println("←", name)
			return resp, err
		})
	}}
}

// The first layer of a stack is the outermost: requests flow down the list
// and responses come back up.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("  server")
	}))
	defer srv.Close()

	stack, err := middleware.NewStack(trace("redirect"), trace("cookies"), trace("retry"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(stack)

	client := &http.Client{Transport: stack.Then(nil)}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// redirect → cookies → retry → transport
	// → redirect
	// → cookies
	// → retry
	//   server
	// ← retry
	// ← cookies
	// ← redirect
}

// Swap answers "what if cookies sat inside retry?" in one line.
func ExampleStack_Swap() {
	stack, _ := middleware.NewStack(trace("redirect"), trace("cookies"), trace("retry"))
	swapped, err := stack.Swap("cookies", "retry")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(swapped)
	_, err = stack.Swap("cookies", "cache")
	fmt.Println(err)
	// Output:
	// redirect → retry → cookies → transport
	// middleware: layer "cache": not in the stack: redirect → cookies → retry → transport
}

// A redirect layer of your own tells the retry layer above which sends
// are redirect hops (Operation.CountRedirect): the report counts them in
// the attempt's Redirects, not as resends the transport made on its own.
func ExampleOperation_CountRedirect() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
		}
	}))
	defer srv.Close()
	follow := middleware.Layer{Name: "my-redirect", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err != nil || resp.StatusCode != http.StatusFound {
				return resp, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			hop := req.Clone(req.Context())
			hop.URL, _ = req.URL.Parse(resp.Header.Get("Location"))
			op, _ := middleware.OperationOf(req.Context())
			op.CountRedirect(hop.Context()) // a hop, not a resend
			return next.RoundTrip(hop)
		})
	}}
	e, _ := engine.New(engine.Config{Policy: policy.Default()})
	stack, _ := middleware.NewStack(e.Layer(), follow)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: stack.Then(tr)}).Get(srv.URL + "/old")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	a := engine.ReportOf(resp).Attempts[0]
	fmt.Println(a.Status, "redirects:", a.Redirects, "transparent:", a.Transparent)
	// Output: 200 redirects: 1 transparent: 0
}

// Log logs each operation's events with log/slog: here a give-up, at
// Warn, after three 503s.
func ExampleLog() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "server.address" {
				return slog.Attr{} // left out, so that the output is the same on every run
			}
			return a
		},
	}))
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	e, _ := engine.New(engine.Config{Policy: p})
	stack, _ := middleware.NewStack(middleware.Log(logger), e.Layer())
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: stack.Then(tr)}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	// Output:
	// level=WARN msg=retrystack.pitfall http.request.method=GET retrystack.pitfall.name=exhausted-retryable-status
	// level=WARN msg=retrystack.give_up http.request.method=GET retrystack.stop_reason=attempts-exhausted retrystack.layer=http
}
