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

// With the cookie layer above the redirect layer (and the retry layer
// between them, or below both), a cookie a redirect hop sets reaches the
// jar, as net/http's Client stores every hop's; with
// DropDiscarded it is named in a cookie-lost pitfall. (The hops after it
// do not carry it: the cookie layer adds cookies once, to the request it
// is given.)
func TestCookieOfARedirectHopAboveTheRedirectLayer(t *testing.T) {
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
		retryAbove bool
		drop       bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		drop := c.drop
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
		layers := []middleware.Layer{watch, cookiejar.Layer(cookiejar.Config{Jar: jar, DropDiscarded: drop}), redirect.Layer(redirect.Config{}), e.Layer()}
		if c.retryAbove { // cookies → retry → redirect
			layers[2], layers[3] = layers[3], layers[2]
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
