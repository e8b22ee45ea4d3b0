package redirect_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/redirect"
)

// The redirect layer follows hops one at a time through the layers below
// it, within a hop limit; a Check with CheckRedirect's signature decides
// each hop.
func ExampleLayer() {
	// /hops/N redirects to /hops/N-1, down to /hops/0.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hops/")); n > 0 {
			http.Redirect(w, r, "/hops/"+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		io.WriteString(w, r.URL.Path)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, cfg := range []redirect.Config{{}, {MaxHops: 1}} {
		s, _ := middleware.NewStack(redirect.Layer(cfg))
		req, _ := http.NewRequest("GET", srv.URL+"/hops/2", nil)
		resp, err := s.Then(tr).RoundTrip(req)
		var hops *redirect.TooManyHopsError
		switch {
		case errors.As(err, &hops):
			fmt.Println("stopped:", err)
		case err != nil:
			fmt.Println(err)
		default:
			path, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(resp.StatusCode, string(path))
		}
	}
	// Output:
	// 200 /hops/0
	// stopped: redirect: stopped after 1 hops
}
