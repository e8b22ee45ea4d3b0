package redirect_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/redirect"
)

// FuzzLocation feeds arbitrary Location headers and statuses to the layer
// over a fake transport: it must never panic, never follow anything but
// http(s), never exceed the hop limit, and never carry credentials to
// another origin.
func FuzzLocation(f *testing.F) {
	for _, seed := range []struct {
		status int
		loc    string
	}{
		{302, "/next"}, {301, "next"}, {307, "../up"}, {308, "https://other.test/x"}, {303, "//other.test/p"},
		{302, "ftp://x/y"}, {302, "http://[::1"}, {302, ""}, {302, "javascript:alert(1)"}, {302, "http://u:p@a.test/"},
		{302, "?q=1"}, {302, "#frag"}, {302, "HTTP://A.TEST:80/"}, {399, "/x"}, {200, "/x"},
	} {
		f.Add(seed.status, seed.loc)
	}
	f.Fuzz(func(t *testing.T, status int, loc string) {
		hops := 0
		var leaked bool
		base := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			hops++
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				t.Fatalf("followed a %q URL", req.URL.Scheme)
			}
			if !strings.EqualFold(req.URL.Hostname(), "a.test") && req.Header.Get("Authorization") != "" {
				leaked = true
			}
			h := http.Header{}
			h.Set("Location", loc)
			return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
		})
		s, _ := middleware.NewStack(redirect.Layer(redirect.Config{MaxHops: 3}))
		req, _ := http.NewRequest("GET", "http://a.test/start", nil)
		req.Header.Set("Authorization", "secret")
		resp, err := s.Then(base).RoundTrip(req)
		if resp != nil {
			if err != nil {
				t.Fatalf("response with error %v", err)
			}
			resp.Body.Close()
		}
		var tooMany *redirect.TooManyHopsError
		var bad *redirect.LocationError
		if err != nil && !errors.As(err, &tooMany) && !errors.As(err, &bad) {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
		if hops > 4 {
			t.Fatalf("%d sends with MaxHops 3", hops)
		}
		if leaked {
			t.Fatalf("Authorization sent to another host after Location %q", loc)
		}
	})
}
