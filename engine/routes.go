package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/retrystack/retrystack/policy"
)

// A Route gives the HTTP requests it matches a policy of their own, so a
// client keeps the retry settings of every endpoint in one place: a
// payment endpoint retried never, a search endpoint three times. Its empty
// fields match anything.
//
// Each route runs under its Policy's Budget: policy.Default() makes a new
// one at each call, so routes built from it keep separate budgets (a storm
// on one endpoint does not stop retries on another). Give several routes
// the same Budget value to share one.
type Route struct {
	Name       string // names the route for WithRoute; optional, unique
	Host       string // the URL's host, with or without its port ("[::1]:8080", "::1"); case-insensitive
	PathPrefix string // a prefix of the URL's path, starting with "/": "/payments/" does not match "/payments"
	Method     string // e.g. "GET", in capitals as net/http sends it
	Policy     policy.Policy
}

func (r *Route) matches(req *http.Request) bool {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	return (r.Host == "" || strings.EqualFold(r.Host, req.URL.Hostname()) || strings.EqualFold(r.Host, req.URL.Host)) &&
		(r.PathPrefix == "" || strings.HasPrefix(req.URL.Path, r.PathPrefix)) &&
		(r.Method == "" || r.Method == method)
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
	e *Engine // the engine's settings under the route's policy
}

// newRoutes validates rs and makes each route's engine from base.
func newRoutes(base *Engine, rs []Route) ([]route, error) {
	out := make([]route, 0, len(rs))
	for i, r := range rs {
		if err := r.Policy.Validate(); err != nil {
			if ce, ok := err.(*policy.ConfigError); ok {
				ce.Field = fmt.Sprintf("Routes[%d].Policy.%s", i, ce.Field)
			}
			return nil, err
		}
		switch {
		case r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/"):
			return nil, &policy.ConfigError{Field: fmt.Sprintf("Routes[%d].PathPrefix", i), Value: r.PathPrefix, Reason: `must start with "/"`}
		case r.Method != "" && r.Method != strings.ToUpper(r.Method):
			return nil, &policy.ConfigError{Field: fmt.Sprintf("Routes[%d].Method", i), Value: r.Method, Reason: "must be in capitals, as net/http sends it"}
		case strings.HasPrefix(r.Host, "[") && strings.HasSuffix(r.Host, "]"):
			r.Host = r.Host[1 : len(r.Host)-1] // "[::1]": the bracketed form of a host without a port
		}
		for _, prev := range rs[:i] {
			if r.Name != "" && prev.Name == r.Name {
				return nil, &policy.ConfigError{Field: fmt.Sprintf("Routes[%d].Name", i), Value: r.Name, Reason: "used by an earlier route"}
			}
		}
		e := *base
		e.p, e.routes = r.Policy, nil
		out = append(out, route{Route: r, e: &e})
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
