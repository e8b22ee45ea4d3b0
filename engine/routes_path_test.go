package engine

import (
	"bufio"
	"bytes"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/retrystack/retrystack/policy"
)

// routeOf returns the one route of an engine built with r.
func routeOf(t *testing.T, r Route) *route {
	t.Helper()
	r.Policy = policy.Default()
	e, err := New(Config{Policy: policy.Default(), Routes: []Route{r}})
	if err != nil {
		t.Fatalf("%+v: %v", r, err)
	}
	return &e.routes[0]
}

// getReq is a GET of u, parsed as http.NewRequest parses it.
func getReq(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// serverPattern returns the pattern net/http's ServeMux routes req by, as
// a server receives it: req is written as the client writes it and read
// back as the server reads it. The pattern of a path that is not clean is
// the one of the clean path the mux redirects to. ok is false when the
// server could not read the request (it answers 400, no handler runs).
func serverPattern(mux *http.ServeMux, req *http.Request) (pattern string, ok bool) {
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		return "", false
	}
	sreq, err := http.ReadRequest(bufio.NewReader(&wire))
	if err != nil {
		return "", false
	}
	_, pattern = mux.Handler(sreq)
	return pattern, true
}

// prefixMux is a ServeMux that has prefix (which ends in "/") as a
// pattern, the same path without its slash (so that the mux does not
// redirect it to prefix), and "/".
func prefixMux(prefix string) *http.ServeMux {
	mux := http.NewServeMux()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux.Handle("/", nop)
	if prefix != "/" {
		mux.Handle(prefix, nop)
		mux.Handle(strings.TrimSuffix(prefix, "/"), nop)
	}
	return mux
}

func TestRoutePathMatchesAsServeMux(t *testing.T) {
	tests := []struct {
		prefix string
		u      *url.URL // or
		raw    string   // parsed by http.NewRequest
		want   bool
	}{
		{prefix: "/payments/", raw: "http://h/payments/x", want: true},
		{prefix: "/payments/", raw: "http://h/payments/", want: true},
		{prefix: "/payments/", raw: "http://h/payments", want: false}, // ServeMux redirects it to "/payments/"
		{prefix: "/payments/", raw: "http://h/a/../payments/x", want: true},
		{prefix: "/payments/", raw: "http://h/../payments/x", want: true},
		{prefix: "/payments/", raw: "http://h/payments/../admin", want: false},
		{prefix: "/payments/", raw: "http://h/payments/..", want: false},
		{prefix: "/payments/", raw: "http://h//payments/x", want: true},
		{prefix: "/payments/", raw: "http://h/payments//x", want: true},
		{prefix: "/payments/", raw: "http://h/payments/./x", want: true},
		{prefix: "/payments/", raw: "http://h/./payments/x", want: true},
		{prefix: "/payments/", raw: "http://h/payments/.", want: false}, // cleaned to "/payments"
		{prefix: "/payments/", raw: "http://h/payments/./", want: true},
		{prefix: "/payments/", raw: "http://h/p%61yments/x", want: true},
		{prefix: "/payments/", raw: "http://h/payments%2Fx", want: false},
		{prefix: "/payments/", raw: "http://h/x/payments/", want: false},
		{prefix: "/payments/", raw: "http://h/Payments/x", want: false}, // paths are case-sensitive
		{prefix: "/payments/", raw: "http://h/payments/%2E%2E/admin", want: true},
		{prefix: "/", raw: "http://h", want: true},
		{prefix: "/", u: &url.URL{Scheme: "http", Host: "h"}, want: true},
		{prefix: "/", raw: "http://h/", want: true},
		{prefix: "/", raw: "http://h/..", want: true},
		{prefix: "/x", raw: "http://h", want: false},
		{prefix: "/a/", raw: "http://h/a%2Fb", want: false},
		{prefix: "/a/", raw: "http://h/a%2fb/c", want: false},
		{prefix: "/a/", raw: "http://h/a/b", want: true},
		{prefix: "/a%2Fb/", raw: "http://h/a%2Fb/c", want: true},
		{prefix: "/a%2Fb/", raw: "http://h/a%2fb/c", want: true},
		{prefix: "/a%2Fb/", raw: "http://h/a/b/c", want: false},
		{prefix: "/a%2Fb/", raw: "http://h//a%2Fb/c", want: true},
		{prefix: "/a/b/", raw: "http://h/a%2Fb/c", want: false},
		{prefix: "/caf%C3%A9/", raw: "http://h/café/x", want: true},
		{prefix: "/café/", raw: "http://h/caf%C3%A9/x", want: true},
		{prefix: "/%2E%2E/", raw: "http://h/%2e%2e/x", want: true}, // an escaped ".." is a name, not cleaned
		{prefix: "/100%/", raw: "http://h/100%25/x", want: true},   // an invalid escape in a prefix is literal
		// RawPath and Opaque: the path is the one on the wire.
		{prefix: "/a/", u: &url.URL{Scheme: "http", Host: "h", Path: "/a/b", RawPath: "/a%2Fb"}, want: false},
		{prefix: "/a/", u: &url.URL{Scheme: "http", Host: "h", Path: "/a/b", RawPath: "/wrong"}, want: true}, // an invalid RawPath is not sent
		{prefix: "/a/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "/a%2Fb"}, want: false},
		{prefix: "/a%2Fb/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "/a%2Fb/c"}, want: true},
		{prefix: "/payments/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "//h/x/../payments/y"}, want: true},
		{prefix: "/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "//h"}, want: true},
		{prefix: "/payments/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "/payments/?q"}, want: true},
		{prefix: "/payments/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "/payments%2Fé"}, want: true}, // not a valid escaped path: the server escapes its Path
		{prefix: "/", u: &url.URL{Scheme: "http", Host: "h", Opaque: "payments"}, want: false},              // no path: the server answers 400
		// A prefix without its trailing slash: a prefix of the last segment.
		{prefix: "/payments", raw: "http://h/payments", want: true},
		{prefix: "/payments", raw: "http://h/payments/x", want: true},
		{prefix: "/payments", raw: "http://h/paymentsX", want: true},
		{prefix: "/payments", raw: "http://h/pay", want: false},
		{prefix: "/payments", raw: "http://h/a/../paymentsX/y", want: true},
		{prefix: "/pay", raw: "http://h/p%61yments", want: true},
		{prefix: "/a%2F", raw: "http://h/a%2Fb", want: true},
		{prefix: "/a%2F", raw: "http://h/a/b", want: false},
	}
	for _, tt := range tests {
		req := &http.Request{Method: "GET", URL: tt.u, Host: "h"}
		name := tt.raw
		if tt.u == nil {
			req = getReq(t, tt.raw)
		} else {
			name = tt.u.String()
		}
		got := routeOf(t, Route{PathPrefix: tt.prefix}).matches(req)
		if got != tt.want {
			t.Errorf("prefix %q, %s (path %q, raw %q, opaque %q): match %v, want %v",
				tt.prefix, name, req.URL.Path, req.URL.RawPath, req.URL.Opaque, got, tt.want)
		}
		// The table agrees with a ServeMux, where a ServeMux has a like pattern.
		if !strings.HasSuffix(tt.prefix, "/") {
			continue
		}
		pat, ok := serverPattern(prefixMux(tt.prefix), req)
		if !ok {
			pat = "(400)"
		}
		if served := pat == tt.prefix; served != tt.want {
			t.Errorf("prefix %q, %s: a ServeMux routes it to %q: the table is wrong", tt.prefix, name, pat)
		}
	}
}

// Over many odd paths, in each URL form, a route matches exactly the
// requests a ServeMux routes to its prefix.
func TestRoutePathAgreesWithServeMux(t *testing.T) {
	prefixes := []string{"/", "/payments/", "/a/", "/a/b/", "/a%2Fb/", "/caf%C3%A9/", "/%2E%2E/", "/a/%2E/"}
	muxes := map[string]*http.ServeMux{}
	routes := map[string]*route{}
	for _, p := range prefixes {
		muxes[p], routes[p] = prefixMux(p), routeOf(t, Route{PathPrefix: p})
	}
	tokens := []string{"/", "/", "//", "/a", "/a", "/b", "/payments", "/payments", "/x", "/.", "/..", "/..", "%2F", "%2f", "b",
		"/%2E", "/%2e%2e", "/p%61yments", "%", "%zz", "é", "/caf%C3%A9", "/café", " ", "?", ";", "%25", "%20", "/a%2Fb", "a"}
	rnd := rand.New(rand.NewSource(24))
	checked, under := 0, 0 // requests checked, and routed under a prefix other than "/"
	for range 5000 {
		var b strings.Builder
		for range rnd.Intn(9) {
			b.WriteString(tokens[rnd.Intn(len(tokens))])
		}
		p := b.String()
		var reqs []*http.Request
		if p == "" || p[0] == '/' {
			if u, err := url.Parse("http://h" + p); err == nil {
				reqs = append(reqs, &http.Request{Method: "GET", URL: u, Host: "h"})
			}
		}
		reqs = append(reqs,
			&http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "h", Path: p}, Host: "h"},
			&http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "h", Opaque: p}, Host: "h"})
		if u, err := url.PathUnescape(p); err == nil {
			reqs = append(reqs, &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "h", Path: u, RawPath: p}, Host: "h"})
		}
		for _, req := range reqs {
			for _, prefix := range prefixes {
				pat, ok := serverPattern(muxes[prefix], req)
				if !ok {
					continue // no handler runs: any route will do
				}
				checked++
				if pat == prefix && prefix != "/" {
					under++
				}
				if got, want := routes[prefix].matches(req), pat == prefix; got != want {
					t.Fatalf("prefix %q, URL path %q raw %q opaque %q: match %v, but a ServeMux routes it to %q",
						prefix, req.URL.Path, req.URL.RawPath, req.URL.Opaque, got, pat)
				}
			}
		}
	}
	if checked < 20000 || under < 1000 {
		t.Errorf("only %d requests checked, %d under a prefix", checked, under)
	}
}

// The route a client picks is the one of the handler a real server runs,
// after the redirect ServeMux answers a path that is not clean with.
func TestRoutePathAgreesWithAServer(t *testing.T) {
	prefixes := []string{"/payments/", "/a/", "/a%2Fb/"}
	mux := http.NewServeMux()
	// "/payments" and "/a%2Fb" have handlers of their own: the mux would
	// redirect them to "/payments/" and (losing the escape) "/a/b/".
	for _, p := range append(prefixes, "/", "/payments", "/a%2Fb") {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, p) })
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	routes := make([]Route, len(prefixes))
	for i, p := range prefixes {
		routes[i] = Route{PathPrefix: p}
	}
	for _, p := range []string{"", "/", "/a/../payments/x", "/payments/../admin", "//payments/x", "/payments/./x",
		"/payments", "/payments/", "/a%2Fb", "/a%2Fb/c", "/a/b", "/x/../a/b", "/p%61yments/x"} {
		req := getReq(t, srv.URL+p)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served := string(body)
		for _, r := range routes {
			if got, want := routeOf(t, r).matches(req), served == r.PathPrefix; got != want {
				t.Errorf("%q: route %q matches %v; the server ran the handler of %q", p, r.PathPrefix, got, served)
			}
		}
	}
}

func TestRouteHostTrailingDot(t *testing.T) {
	tests := []struct {
		host, url string
		want      bool
	}{
		{"example.com", "http://example.com./x", true},
		{"example.com", "http://EXAMPLE.com.:8080/x", true},
		{"example.com.", "http://example.com/x", true},
		{"Example.COM.", "http://example.com./x", true},
		{"example.com:8080", "http://example.com.:8080/x", true},
		{"example.com.:8080", "http://example.com:8080/x", true},
		{"example.com:8080", "http://example.com.:9090/x", false},
		{"example.com:8080", "http://example.com/x", false},
		{"example.com", "http://example.co/x", false},
		{"example.com", "http://example.com../x", false},
		{"[::1]", "http://[::1]:8080/x", true},
		{"::1", "http://[::1]/x", true},
		{"[::1]:8080", "http://[::1]:8080/x", true},
		{"[::1]:8080", "http://[::1]:9090/x", false},
	}
	for _, tt := range tests {
		if got := routeOf(t, Route{Host: tt.host}).matches(getReq(t, tt.url)); got != tt.want {
			t.Errorf("host %q, %s: match %v, want %v", tt.host, tt.url, got, tt.want)
		}
	}
}

func TestRoutePathPrefixMustBeClean(t *testing.T) {
	for _, p := range []string{"/a//b", "//", "//a", "/a/./b", "/a/../b", "/a/.", "/a/..", "/.", "/..", "/./", "/../", "/a/b/.", "payments/", "."} {
		_, err := New(Config{Policy: policy.Default(), Routes: []Route{{Name: "a", Policy: policy.Default()}, {PathPrefix: p, Policy: policy.Default()}}})
		if ce, ok := err.(*policy.ConfigError); !ok || ce.Field != "engine.Config.Routes[1].PathPrefix" || ce.Value != p {
			t.Errorf("PathPrefix %q: error %v, want a *policy.ConfigError for Routes[1].PathPrefix", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "/a/", "/a.", "/a./", "/.a/", "/..a", "/a/...", "/a/.../", "/a%2Fb/", "/%2E%2E/"} {
		if _, err := New(Config{Policy: policy.Default(), Routes: []Route{{PathPrefix: p, Policy: policy.Default()}}}); err != nil {
			t.Errorf("PathPrefix %q: %v", p, err)
		}
	}
	// Clean exactly as ServeMux cleans.
	rnd := rand.New(rand.NewSource(6))
	parts := []string{"/", "a", ".", "..", "...", ".a", "a."}
	for range 5000 {
		var b strings.Builder
		b.WriteString("/")
		for range rnd.Intn(7) {
			b.WriteString(parts[rnd.Intn(len(parts))])
		}
		p := b.String()
		_, err := New(Config{Policy: policy.Default(), Routes: []Route{{PathPrefix: p, Policy: policy.Default()}}})
		if clean := cleanPath(p) == p; clean != (err == nil) { // isClean, the fast check, agrees with the cleaning itself
			t.Fatalf("PathPrefix %q: error %v, but clean is %v", p, err, clean)
		}
	}
}

var matchSink bool

// Matching a clean path allocates nothing, escaped or not (no RawPath),
// and an unclean one still picks the route.
func TestRouteMatchDoesNotAllocate(t *testing.T) {
	tests := []struct {
		r    Route
		url  string
		want bool
	}{
		{Route{Host: "example.com", PathPrefix: "/payments/", Method: "GET"}, "http://Example.com.:8080/payments/charge", true},
		{Route{PathPrefix: "/payments/"}, "http://h/search/q", false},
		{Route{PathPrefix: "/payments"}, "http://h/paymentsX", true},
		{Route{PathPrefix: "/caf%C3%A9/"}, "http://h/caf%C3%A9/x", true}, // an escape, no RawPath
		{Route{PathPrefix: "/"}, "http://h", true},
	}
	for _, tt := range tests {
		r, req := routeOf(t, tt.r), getReq(t, tt.url)
		if got := r.matches(req); got != tt.want {
			t.Errorf("host %q prefix %q, %s: match %v, want %v", tt.r.Host, tt.r.PathPrefix, tt.url, got, tt.want)
		}
		if n := testing.AllocsPerRun(200, func() { matchSink = r.matches(req) }); n != 0 {
			t.Errorf("host %q prefix %q, %s: %v allocations per match, want 0", tt.r.Host, tt.r.PathPrefix, tt.url, n)
		}
	}
}
