package cookiejar_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/middleware"
)

// The cookie layer keeps what a server sets in a jar and sends it back:
// /login sets lb=node-2 on its first answer and session=abc on the next,
// and /me answers with the Cookie header it received.
func ExampleLayer() {
	var logins atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/login" && logins.Add(1) == 1:
			http.SetCookie(w, &http.Cookie{Name: "lb", Value: "node-2", Path: "/"})
		case r.URL.Path == "/login":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc", Path: "/"})
		case r.URL.Path == "/me":
			io.WriteString(w, r.Header.Get("Cookie"))
		}
	}))
	defer srv.Close()
	s, _ := middleware.NewStack(cookiejar.Layer(cookiejar.Config{Jar: cookiejar.NewJar()}))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	for _, path := range []string{"/login", "/login", "/me"} {
		resp, err := c.Get(srv.URL + path)
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
