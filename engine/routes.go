package engine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/policy"
)

// A Route gives the HTTP requests it matches a policy of their own, so a
// client keeps the retry settings of every endpoint in one place: a
// payment endpoint retried never, a search endpoint three times. Its empty
// fields match anything.
//
// PathPrefix matches the path as net/http's ServeMux (Go 1.22 patterns)
// routes the request, not the literal req.URL.Path, so a client picks the
// route of the handler the server will run:
//
//   - the path is the one that goes on the wire (req.URL.EscapedPath(),
//     so RawPath when it is valid; or the path of req.URL.Opaque), cleaned
//     as ServeMux cleans it (it redirects other paths to the clean one):
//     "." and ".." segments resolved, repeated slashes collapsed, a
//     trailing slash kept, an empty path read as "/". "/a/../payments/x",
//     "//payments/x" and "/payments/./x" match "/payments/";
//     "/payments/../admin" does not. An Opaque that is not a path
//     ("//host/p" is the path "/p") matches no PathPrefix. (ServeMux's
//     redirects of a path with escapes lose them: "//a%2Fb/x" goes to
//     "/a%252Fb/x". The route is the one of the clean path the mux
//     matched, not of where its redirect lands);
//   - the path is compared segment by segment, each segment unescaped as
//     ServeMux unescapes it: an escaped slash is no separator, so "/a%2Fb"
//     is the one segment "a/b" and does not match "/a/", while "/a%2Fb/c"
//     matches "/a%2Fb/". Escapes in PathPrefix are read the same way
//     ("/caf%C3%A9/" is "/café/", "%2F" is "%2f", "/p%61y/" is "/pay/");
//     a segment with an invalid escape compares as written;
//   - all of PathPrefix's segments but the last must equal the path's. A
//     PathPrefix ending in "/" then needs the path to go on: "/payments/"
//     matches "/payments/" and "/payments/x", not "/payments" (which
//     ServeMux redirects to "/payments/" when only "/payments/" is
//     registered). A last segment without its slash is a prefix of the
//     path's segment: "/payments" matches "/payments", "/payments/x" and
//     "/paymentsX" (ServeMux has no such pattern; give the slash to match
//     a subtree only).
//
// PathPrefix must start with "/" and be clean (no "//", "/./" or "/../"
// in it, no "/." or "/.." at its end): a server never routes by another.
// Host is compared with req.URL's host case-insensitively, a trailing dot
// dropped on both sides ("example.com." is example.com); a Host without a
// port matches any port.
//
// Each route runs under its Policy's Budget: policy.Default() makes a new
// one at each call, so routes built from it keep separate budgets (a storm
// on one endpoint does not stop retries on another). Give several routes
// the same Budget value to share one.
type Route struct {
	Name       string // names the route for WithRoute; optional, unique
	Host       string // the URL's host, with or without its port ("[::1]:8080", "::1"); case-insensitive, a trailing dot ignored
	PathPrefix string // a clean prefix of the path, starting with "/", matched as ServeMux routes: "/payments/" does not match "/payments"
	Method     string // e.g. "GET", in capitals as net/http sends it
	Policy     policy.Policy
}

// matches reports whether req is the route's (see Route). It allocates
// nothing for a clean path without RawPath (most requests).
func (r *route) matches(req *http.Request) bool {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if r.Method != "" && r.Method != method {
		return false
	}
	if r.host != "" {
		if !strings.EqualFold(r.host, strings.TrimSuffix(req.URL.Hostname(), ".")) || r.port != "" && r.port != req.URL.Port() {
			return false
		}
	}
	if r.PathPrefix == "" {
		return true
	}
	// Without RawPath (or Opaque) the escaped path is url's escape of Path:
	// the same segments once unescaped, the same "."s and "/"s, so Path
	// itself is matched, its segments as they are, and needs no escaping.
	p, escaped := req.URL.Path, false
	if req.URL.RawPath != "" || req.URL.Opaque != "" || p == "*" {
		var ok bool
		if p, ok = wirePath(req.URL); !ok {
			return false
		}
		escaped = true
	}
	if !isClean(p) {
		p = cleanPath(p) // allocates; a client rarely sends such a path
	}
	return r.underPrefix(p, escaped)
}

// wirePath returns the escaped path a server routes u by: the one of
// u.EscapedPath(), or, for an Opaque u, the one a server parses off the
// request target net/http sends (Opaque as it is, or scheme:Opaque for
// "//host/p"); false when the server cannot parse it (it answers 400).
func wirePath(u *url.URL) (string, bool) {
	if u.Opaque == "" {
		return u.EscapedPath(), true
	}
	target := u.Opaque
	if strings.HasPrefix(target, "//") {
		target = u.Scheme + ":" + target
	}
	su, err := url.ParseRequestURI(target)
	if err != nil {
		return "", false
	}
	return su.EscapedPath(), true
}

// isClean reports whether cleanPath(p) == p, without allocating.
func isClean(p string) bool {
	return p != "" && p[0] == '/' &&
		!strings.Contains(p, "//") && !strings.Contains(p, "/./") && !strings.Contains(p, "/../") &&
		!strings.HasSuffix(p, "/.") && !strings.HasSuffix(p, "/..")
}

// cleanPath is net/http's: the path ServeMux routes by (and redirects to).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// underPrefix reports whether the clean path p (escaped or not) is under
// the route's PathPrefix, segment by segment.
func (r *route) underPrefix(p string, escaped bool) bool {
	for i, want := range r.segs {
		if p == "" {
			return false // the path ended before the prefix
		}
		seg, rest := p[1:], ""
		if j := strings.IndexByte(seg, '/'); j >= 0 {
			seg, rest = seg[:j], seg[j:]
		}
		if i == len(r.segs)-1 && !r.dir {
			return segmentMatches(seg, want, escaped, true)
		}
		if !segmentMatches(seg, want, escaped, false) {
			return false
		}
		p = rest
	}
	return p != "" // a prefix ending in "/" needs the path to go on
}

// segmentMatches reports whether the segment seg, unescaped as ServeMux
// unescapes it if escaped, equals want (or, if partial, starts with it),
// without allocating.
func segmentMatches(seg, want string, escaped, partial bool) bool {
	if !escaped || !validEscapes(seg) { // an invalid escape is compared as written, as ServeMux does
		if partial {
			return strings.HasPrefix(seg, want)
		}
		return seg == want
	}
	j := 0
	for i := 0; i < len(seg); j++ {
		c := seg[i]
		if c == '%' {
			c = unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 3
		} else {
			i++
		}
		if j == len(want) {
			return partial
		}
		if want[j] != c {
			return false
		}
	}
	return j == len(want)
}

// validEscapes reports whether url.PathUnescape(s) succeeds.
func validEscapes(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
			return false
		}
		s = s[i+3:]
	}
	return true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

type routeKey struct{}

// WithRoute returns a context under which a request runs under the route
// called name, whatever the routes' rules say: the per-request override.
// A name no route has (or "") is ignored. Above a redirect layer a route
// is chosen for the first URL of the operation; below it, for each hop.
func WithRoute(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, routeKey{}, name)
}

type route struct {
	Route
	host, port string   // Host, without brackets or a trailing dot; port "" for any
	segs       []string // PathPrefix's segments, unescaped ("/a/b/": "a", "b")
	dir        bool     // PathPrefix ends in "/"
	e          *Engine  // the engine's settings under the route's policy
}

// newRoutes validates rs and makes each route's engine from base.
func newRoutes(base *Engine, rs []Route) ([]route, error) {
	out := make([]route, 0, len(rs))
	for i, r := range rs {
		if err := r.Policy.Validate(); err != nil {
			return nil, configerr.Rebase(err, "policy.Policy.", fmt.Sprintf("engine.Config.Routes[%d].Policy.", i))
		}
		switch {
		case r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/"):
			return nil, &policy.ConfigError{Field: fmt.Sprintf("engine.Config.Routes[%d].PathPrefix", i), Value: r.PathPrefix, Reason: `must start with "/"`}
		case r.PathPrefix != "" && !isClean(r.PathPrefix):
			return nil, &policy.ConfigError{Field: fmt.Sprintf("engine.Config.Routes[%d].PathPrefix", i), Value: r.PathPrefix, Reason: `must be clean (no "//", "/./" or "/../", no "/." or "/.." at its end): a server routes by clean paths`}
		case r.Method != "" && r.Method != strings.ToUpper(r.Method):
			return nil, &policy.ConfigError{Field: fmt.Sprintf("engine.Config.Routes[%d].Method", i), Value: r.Method, Reason: "must be in capitals, as net/http sends it"}
		}
		for _, prev := range rs[:i] {
			if r.Name != "" && prev.Name == r.Name {
				return nil, &policy.ConfigError{Field: fmt.Sprintf("engine.Config.Routes[%d].Name", i), Value: r.Name, Reason: "used by an earlier route"}
			}
		}
		e := *base
		e.p, e.routes = r.Policy, nil
		e.attemptValues = attemptValues(r.Policy.MaxAttempts)
		rt := route{Route: r, e: &e}
		rt.host = r.Host
		if h, port, err := net.SplitHostPort(r.Host); err == nil {
			rt.host, rt.port = h, port // "example.com:8080", "[::1]:8080"
		} else if strings.HasPrefix(r.Host, "[") && strings.HasSuffix(r.Host, "]") {
			rt.host = r.Host[1 : len(r.Host)-1] // "[::1]": the bracketed form of a host without a port
		}
		rt.host = strings.TrimSuffix(rt.host, ".")
		if r.PathPrefix != "" {
			rest, dir := strings.CutSuffix(r.PathPrefix[1:], "/")
			rt.dir = dir || r.PathPrefix == "/"
			if rest != "" {
				for _, seg := range strings.Split(rest, "/") {
					if u, err := url.PathUnescape(seg); err == nil {
						seg = u // else compared as written, as ServeMux does
					}
					rt.segs = append(rt.segs, seg)
				}
			}
		}
		out = append(out, rt)
	}
	return out, nil
}

// pick returns the engine a request runs under: the route WithRoute
// names, else the first route that matches, else e itself.
func (e *Engine) pick(req *http.Request) *Engine {
	if len(e.routes) == 0 {
		return e
	}
	if name, ok := req.Context().Value(routeKey{}).(string); ok && name != "" {
		for i := range e.routes {
			if e.routes[i].Name == name {
				return e.routes[i].e
			}
		}
	}
	for i := range e.routes {
		if e.routes[i].matches(req) {
			return e.routes[i].e
		}
	}
	return e
}
