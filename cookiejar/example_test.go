package cookiejar_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/middleware"
)

// The cookie layer keeps what a server sets in a jar and sends it back:
// /login sets lb=node-2 on its first answer and session=abc on the next,
// and /me answers with the Cookie header it received.
func ExampleLayer() {
	srv, _ := faultserver.New()
	defer srv.Close()
	s, _ := middleware.NewStack(cookiejar.Layer(cookiejar.Config{Jar: cookiejar.NewJar()}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	for _, path := range []string{"/login", "/login", "/me"} {
		resp, err := c.Get(srv.URL() + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/me" {
			fmt.Printf("%s\n", body)
		}
	}
	// Output: lb=node-2; session=abc
}
