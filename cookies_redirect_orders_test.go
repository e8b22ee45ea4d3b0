package retrystack_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
)

// pitfallNames keeps the cookie-lost pitfalls told to an operation.
type pitfallNames struct {
	mu   sync.Mutex
	seen []string
}

func (p *pitfallNames) Observe(e middleware.Event) {
	if e.Name != middleware.EventPitfall {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range e.Attrs {
		if a.Key == "retrystack.pitfall.cookies" {
			p.seen = append(p.seen, a.Value.AsStringSlice()...)
		}
	}
}

// In every order of the cookie, redirect and retry layers a cookie a
// redirect hop sets reaches the jar, as net/http's Client stores every
// hop's; with the cookie layer above the redirect layer and DropDiscarded
// it is named in a cookie-lost pitfall instead. (Above the redirect layer
// the hops after it do not carry it: the cookie layer adds cookies once,
// to the request it is given.)
func TestCookieOfARedirectHopInEveryOrder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc", Path: "/"})
			http.Redirect(w, r, "/home", http.StatusFound)
		default:
			if c, err := r.Cookie("session"); err == nil {
				io.WriteString(w, c.Value)
			}
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		order []string
		drop  bool
	}{
		{[]string{"redirect", "cookies", "retry"}, false}, {[]string{"redirect", "cookies", "retry"}, true},
		{[]string{"redirect", "retry", "cookies"}, false}, {[]string{"redirect", "retry", "cookies"}, true},
		{[]string{"retry", "redirect", "cookies"}, false}, {[]string{"retry", "redirect", "cookies"}, true},
		{[]string{"retry", "cookies", "redirect"}, false}, {[]string{"retry", "cookies", "redirect"}, true},
		{[]string{"cookies", "redirect", "retry"}, false}, {[]string{"cookies", "redirect", "retry"}, true},
		{[]string{"cookies", "retry", "redirect"}, false}, {[]string{"cookies", "retry", "redirect"}, true},
	} {
		// A hop's response passes through a cookie layer below the
		// redirect layer, which stores its cookies whatever DropDiscarded
		// says; above it, DropDiscarded names them lost instead.
		above := slices.Index(c.order, "cookies") < slices.Index(c.order, "redirect")
		drop := c.drop && above
		jar := cookiejar.NewJar()
		e, err := engine.New(engine.Config{Policy: policy.Default()})
		if err != nil {
			t.Fatal(err)
		}
		var lost pitfallNames
		watch := middleware.Layer{Name: "watch", Wrap: func(next http.RoundTripper) http.RoundTripper {
			return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				op, _ := middleware.OperationOf(req.Context())
				op.Observe(&lost)
				return next.RoundTrip(req)
			})
		}}
		byName := map[string]middleware.Layer{"cookies": cookiejar.Layer(cookiejar.Config{Jar: jar, DropDiscarded: c.drop}),
			"redirect": redirect.Layer(redirect.Config{}), "retry": e.Layer()}
		layers := []middleware.Layer{watch}
		for _, n := range c.order {
			layers = append(layers, byName[n])
		}
		st, err := middleware.NewStack(layers...)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{}
		client := &http.Client{Transport: st.Then(tr)}
		get := func(path string) string {
			resp, err := client.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		get("/login")
		me := get("/me")
		tr.CloseIdleConnections()
		switch {
		case !drop && (me != "abc" || len(lost.seen) != 0):
			t.Errorf("%+v: /me got session %q, pitfalls %v; want abc and none", c, me, lost.seen)
		case drop && (me != "" || !slices.Equal(lost.seen, []string{"session"})):
			t.Errorf("%+v: /me got session %q, cookie-lost %v; want none and [session]", c, me, lost.seen)
		}
	}
}
