package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/retrystack/retrystack/middleware"
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
