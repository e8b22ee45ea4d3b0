// Command layerorder is a layer-order experiment: the same login, in
// reqwest's order (cookies outside retry) and with cookies and retry
// swapped, printed with what the server received afterwards. The cookie
// layer is set to drop the cookies of responses the retry layer throws
// away, as reqwest does (retrystack's default keeps them).
//
//	go run ./examples/layerorder
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "layerorder:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	srv := loginServer()
	defer srv.Close()

	// Seed 003's naive classifier, as reqwest has it: every 503 is
	// retried, at once, POST included.
	p := policy.Never()
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify

	for _, order := range []func(middleware.Stack) (middleware.Stack, error){
		func(s middleware.Stack) (middleware.Stack, error) { return s, nil },
		func(s middleware.Stack) (middleware.Stack, error) { return s.Swap("cookies", "retry") },
	} {
		base, err := retrystack.NewStack(retrystack.Config{Policy: &p, Cookies: cookiejar.Config{Jar: cookiejar.NewJar(), DropDiscarded: true}})
		if err != nil {
			return err
		}
		stack, err := order(base)
		if err != nil {
			return err
		}
		client := retrystack.Client(stack, &http.Transport{})
		key := strings.ReplaceAll(stack.String(), " ", "")
		resp, err := client.Post(srv.URL+"/login?key="+key, "text/plain", strings.NewReader("user=a"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		resp, err = client.Get(srv.URL + "/me?key=" + key)
		if err != nil {
			return err
		}
		me, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		client.CloseIdleConnections()
		fmt.Fprintf(w, "%-40s /me received %q\n", stack, me)
	}
	return nil
}

// loginServer is the seed's load balancer: the first POST /login of each
// client (its query's key=) meets a node that answers 503 and pins the
// client to another node (Set-Cookie lb=node-2); the retry logs in
// (session=abc). GET /me answers with the cookies it was sent.
func loginServer() *httptest.Server {
	var mu sync.Mutex
	logins := map[string]int{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			mu.Lock()
			logins[r.URL.Query().Get("key")]++
			n := logins[r.URL.Query().Get("key")]
			mu.Unlock()
			if n == 1 {
				w.Header().Add("Set-Cookie", "lb=node-2; Path=/")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Add("Set-Cookie", "session=abc; Path=/")
		case "/me":
			io.WriteString(w, r.Header.Get("Cookie"))
		}
	}))
}
