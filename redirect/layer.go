package redirect

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/retrystack/retrystack/internal/events"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// defaultMaxHops is the hop limit when Config.MaxHops is 0: ten hops are
// followed, an eleventh fails (net/http's client fails on its tenth).
const defaultMaxHops = 10

// Config configures the redirect layer. The zero value follows up to 10
// hops.
type Config struct {
	// MaxHops is the most hops followed; 0 means 10 (an eleventh fails). Negative
	// values are invalid.
	MaxHops int
	// Check, when set, is called before each hop with the next request and
	// the requests made so far, oldest first, like http.Client's
	// CheckRedirect: http.ErrUseLastResponse returns the 3xx response as
	// it is, and any other error fails the request with that error.
	Check func(next *http.Request, via []*http.Request) error
}

// TooManyHopsError reports a chain longer than the hop limit.
type TooManyHopsError struct{ Max int }

func (e *TooManyHopsError) Error() string {
	return fmt.Sprintf("redirect: stopped after %d hops", e.Max)
}

// ErrorType names the error for telemetry's error.type:
// "redirect-hop-limit".
func (e *TooManyHopsError) ErrorType() string { return "redirect-hop-limit" }

// LocationError reports a Location the layer will not follow.
type LocationError struct {
	Location string
	Reason   string
	Err      error // the parse error, if any
}

func (e *LocationError) Error() string {
	return fmt.Sprintf("redirect: bad Location %q: %s", e.Location, e.Reason)
}

func (e *LocationError) Unwrap() error { return e.Err }

// Layer returns the redirect layer, named "redirect". A negative MaxHops
// gives a layer that NewStack rejects.
func Layer(cfg Config) middleware.Layer {
	if cfg.MaxHops < 0 {
		return middleware.Layer{Name: "redirect", Err: &policy.ConfigError{Field: "redirect.Config.MaxHops", Value: cfg.MaxHops,
			Reason: "must not be negative (0: the default, 10; to follow none, set Check to return http.ErrUseLastResponse)"}}
	}
	if cfg.MaxHops == 0 {
		cfg.MaxHops = defaultMaxHops
	}
	return middleware.Layer{Name: "redirect", Wrap: func(next http.RoundTripper) http.RoundTripper {
		next = wire.Base(next)
		return &transport{next: next, cfg: cfg}
	}}
}

type transport struct {
	next http.RoundTripper
	cfg  Config
}

// sensitive are the headers dropped on a hop to another origin.
var sensitive = []string{"Authorization", "Cookie", "Proxy-Authorization", "Www-Authenticate"}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cur := req
	op, _ := middleware.OperationOf(req.Context())
	var via []*http.Request
	for hops := 0; ; hops++ {
		if hops > 0 {
			// A retry layer above counts this send as a hop of its
			// attempt, not as one the transport made on its own.
			op.CountRedirect(cur.Context())
		}
		resp, err := wire.RoundTrip(t.next, cur)
		if err != nil {
			return nil, err
		}
		next, err := t.follow(req, cur, resp, hops, via)
		if next == nil || err != nil {
			if err != nil {
				discard(op, resp)
				return nil, err
			}
			return resp, nil
		}
		discard(op, resp)
		via = append(via, cur)
		cur = next
	}
}

// discard releases a hop's response, which the caller never gets: a
// cookie layer above is shown it first and stores its cookies, as
// net/http's Client stores those of every hop in its Jar; those it does
// not store are the pitfall cookie-lost, told to the operation's
// observers.
func discard(op middleware.Operation, resp *http.Response) {
	if lost := op.ShowDiscarded(resp); len(lost) > 0 {
		op.Emit(middleware.Event{Name: middleware.EventPitfall, Attrs: events.PitfallAttrs(pitfallCookieLost, lost)})
	}
	wire.Discard(resp)
}

// pitfallCookieLost is engine.PitfallCookieLost, named here without
// importing the engine.
const pitfallCookieLost = "cookie-lost"

// follow builds the request for the hop resp asks for; nil means resp is
// the answer.
func (t *transport) follow(orig, cur *http.Request, resp *http.Response, hops int, via []*http.Request) (*http.Request, error) {
	code := resp.StatusCode
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, nil
	}
	u, err := cur.URL.Parse(loc)
	if err != nil {
		return nil, &LocationError{Location: loc, Reason: "cannot be parsed", Err: err}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &LocationError{Location: loc, Reason: "not http or https"}
	}
	if hops >= t.cfg.MaxHops {
		return nil, &TooManyHopsError{Max: t.cfg.MaxHops}
	}

	method, replay := cur.Method, false
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		// As net/http: anything but GET and HEAD becomes a GET without a
		// body, never the same verb with its body gone.
		if method != http.MethodGet && method != http.MethodHead && method != "" {
			method = http.MethodGet
		}
	default: // 307, 308
		replay = wire.HasBody(orig)
		if !wire.Replayable(orig) {
			return nil, nil // the body is gone: hand back the 3xx as it is
		}
	}

	next := cur.Clone(cur.Context()) // it carries the operation: one send count for every hop
	next.Method, next.URL, next.Host = method, u, ""
	if cur.Host != "" && u.Host == cur.URL.Host {
		// A custom Host survives a hop to the same host and port, as in
		// net/http (golang.org/issue/22233, which keeps it for a relative
		// Location); another host gets its own.
		next.Host = cur.Host
	}
	next.Body, next.GetBody, next.ContentLength = nil, nil, 0
	if replay {
		next.GetBody, next.ContentLength = orig.GetBody, orig.ContentLength
	} else {
		for _, h := range []string{"Content-Type", "Content-Length", "Content-Encoding"} {
			next.Header.Del(h)
		}
	}
	if !sameOrigin(cur.URL, u) {
		for _, h := range sensitive {
			next.Header.Del(h)
		}
	}
	if t.cfg.Check != nil {
		if err := t.cfg.Check(next, append(via, cur)); err != nil {
			if errors.Is(err, http.ErrUseLastResponse) {
				return nil, nil
			}
			return nil, err
		}
	}
	if replay {
		body, err := orig.GetBody()
		if err != nil {
			return nil, err
		}
		next.Body = body
	}
	return next, nil
}

// sameOrigin compares scheme, host and port (RFC 6454), default ports
// included.
func sameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func (t *transport) CloseIdleConnections() {
	wire.CloseIdle(t.next)
}
