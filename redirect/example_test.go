package redirect_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/redirect"
)

// The redirect layer follows hops one at a time through the layers below
// it, within a hop limit; a Check with CheckRedirect's signature decides
// each hop.
func ExampleLayer() {
	srv, _ := faultserver.New()
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, cfg := range []redirect.Config{{}, {MaxHops: 1}} {
		s, _ := middleware.NewStack(redirect.Layer(cfg))
		req, _ := http.NewRequest("GET", srv.URL()+"/redirect/302/2", nil)
		resp, err := s.Then(tr).RoundTrip(req)
		var hops *redirect.TooManyHopsError
		switch {
		case errors.As(err, &hops):
			fmt.Println("stopped:", err)
		case err != nil:
			fmt.Println(err)
		default:
			var e faultserver.Echo
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			fmt.Println(resp.StatusCode, e.Path)
		}
	}
	// Output:
	// 200 /redirect/302/0
	// stopped: redirect: stopped after 1 hops
}
