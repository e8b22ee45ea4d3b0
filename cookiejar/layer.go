package cookiejar

import (
	"net/http"
	stdjar "net/http/cookiejar"
	"net/url"
	"sync/atomic"

	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"golang.org/x/net/publicsuffix"
)

// Config configures the cookie layer. Storage is opt-in, as in net/http's
// Client and reqwest's default client: the zero value stores and sends no
// cookies, and the layer passes requests through untouched.
type Config struct {
	// Jar holds the cookies; nil: none are kept. NewJar is the usual one.
	// It must be safe for concurrent use, and it is shared by every caller
	// of the stack: one user's jar must never sit in a transport that
	// serves many (a reverse proxy, a server's outbound client).
	Jar http.CookieJar
	// DropDiscarded does not store the cookies of responses that a retry
	// layer below throws away, and names them in the pitfall cookie-lost:
	// what reqwest does in its order (cookies outside retries). By default
	// they are stored (RFC 6265: a user agent stores the cookies of every
	// response it receives), and nothing is lost.
	DropDiscarded bool
}

// NewJar returns the default jar: net/http/cookiejar with the public-suffix
// list, so one site cannot set cookies for a whole public suffix. Until a
// response sets a cookie it answers without looking anything up: most
// clients talk to servers that set none.
func NewJar() http.CookieJar {
	jar, _ := stdjar.New(&stdjar.Options{PublicSuffixList: publicsuffix.List}) // never fails
	return &lazyJar{jar: jar}
}

type lazyJar struct {
	jar  *stdjar.Jar
	used atomic.Bool // a cookie was offered to the jar
}

func (j *lazyJar) Cookies(u *url.URL) []*http.Cookie {
	if !j.used.Load() {
		return nil
	}
	return j.jar.Cookies(u)
}

func (j *lazyJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	if len(cookies) > 0 {
		j.used.Store(true)
		j.jar.SetCookies(u, cookies)
	}
}

// Layer returns the cookie layer, named "cookies". Every RoundTripper it
// wraps shares cfg.Jar. Without a Jar the layer is only a name in the
// stack (so orders can still be printed and swapped): it wraps nothing.
func Layer(cfg Config) middleware.Layer {
	jar := cfg.Jar
	return middleware.Layer{Name: "cookies", Wrap: func(next http.RoundTripper) http.RoundTripper {
		next = wire.Base(next)
		if jar == nil {
			return next
		}
		t := &transport{next: next, jar: jar, capture: !cfg.DropDiscarded}
		t.observe = t.discarded
		return t
	}}
}

type transport struct {
	next    http.RoundTripper
	jar     http.CookieJar
	capture bool
	observe middleware.DiscardObserver // t.discarded, bound once
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req
	if op, ok := middleware.OperationOf(req.Context()); ok {
		// Retry layers below see the responses they discard; when this
		// RoundTrip returns, the layers above see what they saw before.
		prev := op.ObserveDiscards(&t.observe)
		defer op.RestoreDiscards(&t.observe, prev)
	}
	if cookies := t.jar.Cookies(cookieURL(req)); len(cookies) > 0 {
		if r == req {
			r = new(http.Request)
			*r = *req
		}
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		for _, c := range cookies {
			r.AddCookie(c)
		}
	}
	resp, err := wire.RoundTrip(t.next, r)
	if err != nil {
		return nil, err
	}
	if cookies := resp.Cookies(); len(cookies) > 0 {
		t.jar.SetCookies(hopURL(resp, req), cookies)
	}
	return resp, nil
}

// cookieURL is the URL req's cookies belong to: its URL, with its Host when
// one is set, as net/http's Client has it.
func cookieURL(req *http.Request) *url.URL {
	if req.Host == "" || req.Host == req.URL.Host {
		return req.URL
	}
	u := *req.URL
	u.Host = req.Host
	return &u
}

// hopURL is the URL of the request that resp answers, the hop that set its
// cookies: behind a redirect layer, not the request this layer sent.
func hopURL(resp *http.Response, sent *http.Request) *url.URL {
	if resp.Request != nil && resp.Request.URL != nil {
		return cookieURL(resp.Request)
	}
	return cookieURL(sent)
}

// discarded sees a response a retry layer below throws away: it stores its
// cookies when capturing, and otherwise names them as lost.
func (t *transport) discarded(resp *http.Response) []string {
	cookies := resp.Cookies()
	if len(cookies) == 0 {
		return nil
	}
	if t.capture && resp.Request != nil && resp.Request.URL != nil {
		t.jar.SetCookies(cookieURL(resp.Request), cookies)
		return nil
	}
	names := make([]string, len(cookies))
	for i, c := range cookies {
		names[i] = c.Name
	}
	return names
}

func (t *transport) CloseIdleConnections() {
	wire.CloseIdle(t.next)
}
