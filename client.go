package retrystack

import (
	"context"
	"fmt"
	"net/http"
	"reflect"

	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
)

// Config configures the entry points. The zero value is the safe default:
// policy.Default(), no cookie storage, up to 10 redirect hops (NewClient),
// over http.DefaultTransport. A field the entry point called cannot honour
// is a *policy.ConfigError, never silently ignored.
type Config struct {
	// Policy decides the retries; nil: policy.Default().
	Policy *policy.Policy
	// Hooks observe every operation's attempts, retries and pitfalls.
	Hooks engine.Hooks
	// FailOnExhausted turns a retryable status the policy gave up on into
	// an *engine.ExhaustedError.
	FailOnExhausted bool
	// Prepare, when set, rebuilds each attempt's request before it is
	// sent (a fresh token, a signature); see engine.Config.Prepare.
	Prepare func(req *http.Request, attempt int) error
	// RefreshAuth, when set, runs once per operation on a 401 and, if it
	// succeeds, sends the request again at once; see
	// engine.Config.RefreshAuth.
	RefreshAuth func(ctx context.Context, resp *http.Response) error
	// Routes give the requests they match policies of their own (one per
	// endpoint, in one place); see engine.Route.
	Routes []engine.Route
	// Signals configures the cross-layer protocol that keeps retries at
	// one layer of a chain of services (package crosslayer): the hosts
	// it is spoken with (none by default) and its header names.
	Signals crosslayer.Signals
	// ReplayLimit and ReplayTotal bound the replay buffer of request
	// bodies that have no GetBody and cannot Seek; see engine.Config.
	ReplayLimit, ReplayTotal int64
	// Cookies configures the cookie layer. Storage is opt-in: with no Jar
	// the layer stores and sends nothing. A jar belongs to every caller of
	// the stack: give one to a client of one user, never to a transport
	// shared by many (a reverse proxy, a server's outbound client).
	Cookies cookiejar.Config
	// Redirect configures the redirect layer (NewClient and NewStack).
	Redirect redirect.Config
	// Transport is the base RoundTripper of NewClient and NewTransport;
	// nil: http.DefaultTransport. NewStack builds only the layers and
	// refuses it: pass the base to Stack.Then or Client.
	Transport http.RoundTripper
	// Telemetry, when set, adds the operation span outermost and an attempt
	// span per physical send innermost, and records retries and pitfalls.
	Telemetry *telemetry.Telemetry
}

// NewTransport returns a retrying http.RoundTripper to hand to an SDK, a
// reverse proxy or any *http.Client: the retry layer (with Telemetry, the
// operation and attempt layers around it) over cfg.Transport. It keeps no
// cookies and follows no redirects: the client above does both, and
// net/http's Client sends every hop through the transport and runs its Jar
// per hop, which is reqwest's order. A Cookies or Redirect setting is a
// *policy.ConfigError here.
func NewTransport(cfg Config) (http.RoundTripper, error) {
	switch {
	case cfg.Cookies != (cookiejar.Config{}):
		return nil, &policy.ConfigError{Field: "retrystack.Config.Cookies", Reason: "NewTransport keeps no cookies: set the Jar of the http.Client above it"}
	case cfg.Redirect.MaxHops != 0 || cfg.Redirect.Check != nil:
		return nil, &policy.ConfigError{Field: "retrystack.Config.Redirect", Reason: "NewTransport follows no redirects: set the CheckRedirect of the http.Client above it"}
	}
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	s, err := middleware.NewStack(withTelemetry(cfg.Telemetry, e.Layer())...)
	if err != nil {
		return nil, err
	}
	return s.Then(cfg.Transport), nil
}

// NewStack returns the layers of the default stack, redirect → cookies →
// retry (with Telemetry: telemetry → redirect → cookies → retry →
// attempt-telemetry), to reorder, extend and put over a base with
// Stack.Then or Client; or the first configuration error (a
// *policy.ConfigError, a middleware error, or a *policy.ConfigError for a
// Transport, which a stack has none of).
func NewStack(cfg Config) (middleware.Stack, error) {
	if cfg.Transport != nil {
		return middleware.Stack{}, &policy.ConfigError{Field: "retrystack.Config.Transport", Reason: "NewStack builds only the layers: pass the base to Stack.Then or retrystack.Client"}
	}
	return newStack(cfg)
}

func newStack(cfg Config) (middleware.Stack, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return middleware.Stack{}, err
	}
	s, err := middleware.NewStack(withTelemetry(cfg.Telemetry,
		redirect.Layer(cfg.Redirect), cookiejar.Layer(cfg.Cookies), e.Layer())...)
	return s, configerr.Rebase(err, "redirect.Config.", "retrystack.Config.Redirect.") // as the caller wrote it
}

func newEngine(cfg Config) (*engine.Engine, error) {
	p := policy.Default()
	if cfg.Policy != nil {
		p = *cfg.Policy
	}
	e, err := engine.New(engine.Config{Policy: p, Hooks: cfg.Hooks, FailOnExhausted: cfg.FailOnExhausted,
		Prepare: cfg.Prepare, RefreshAuth: cfg.RefreshAuth, Routes: cfg.Routes, Signals: cfg.Signals,
		ReplayLimit: cfg.ReplayLimit, ReplayTotal: cfg.ReplayTotal})
	return e, configerr.Rebase(err, "engine.Config.", "retrystack.Config.") // the caller's Config has the engine's fields
}

// withTelemetry puts t's operation layer outermost and its attempt layer
// innermost around layers, when t is set.
func withTelemetry(t *telemetry.Telemetry, layers ...middleware.Layer) []middleware.Layer {
	if t == nil {
		return layers
	}
	return append(append([]middleware.Layer{t.Operation()}, layers...), t.Attempt())
}

// NewClient returns an *http.Client over the default stack, redirect →
// cookies → retry → cfg.Transport, or the first configuration error.
//
// The stack follows redirects and keeps cookies itself, so that every hop
// passes through cookies and retry and one operation covers them all:
// cfg.Redirect and cfg.Cookies are the client's only redirect and cookie
// policy (redirect.Config.Check has CheckRedirect's signature). The
// client's own CheckRedirect hands back whatever 3xx the stack hands back,
// and its Jar is nil; a request through a client whose CheckRedirect or
// Jar was changed fails with a *policy.ConfigError saying where the setting
// goes, rather than have it half-applied.
func NewClient(cfg Config) (*http.Client, error) {
	s, err := NewStack(cfg.withoutTransport())
	if err != nil {
		return nil, err
	}
	return Client(s, cfg.Transport), nil
}

func (cfg Config) withoutTransport() Config {
	cfg.Transport = nil
	return cfg
}

// Client returns an *http.Client that sends through s over base (nil:
// http.DefaultTransport), with the client's own redirect following and
// cookie jar off so nothing runs twice: CheckRedirect hands back whatever
// 3xx the stack hands back, and the stack's layers are its only redirect
// and cookie policy. As with NewClient, a request through it after its
// CheckRedirect or Jar was changed is a *policy.ConfigError.
func Client(s middleware.Stack, base http.RoundTripper) *http.Client {
	c := &http.Client{CheckRedirect: stackFollows}
	c.Transport = &clientTransport{client: c, RoundTripper: s.Then(base)}
	return c
}

// stackFollows is the CheckRedirect of the clients made here: the stack
// has followed every redirect it was going to.
func stackFollows(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

var stackFollowsPC = reflect.ValueOf(stackFollows).Pointer()

// clientTransport is the Transport of the clients made here: it refuses
// to send while the client's CheckRedirect or Jar would be ignored (or
// half-applied: net/http would run a Jar around the whole chain of hops,
// and follow again what the stack handed back).
type clientTransport struct {
	client *http.Client
	http.RoundTripper
}

func (t *clientTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var err *policy.ConfigError
	switch c := t.client; {
	case c.CheckRedirect == nil || reflect.ValueOf(c.CheckRedirect).Pointer() != stackFollowsPC:
		err = &policy.ConfigError{Field: "http.Client.CheckRedirect", Reason: "the stack follows redirects: set Config.Redirect.Check (redirect.Config.Check) instead"}
	case c.Jar != nil:
		err = &policy.ConfigError{Field: "http.Client.Jar", Reason: "the stack keeps cookies per hop: set Config.Cookies.Jar (cookiejar.Config.Jar) instead"}
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.RoundTripper.RoundTrip(req)
}

// CloseIdleConnections forwards to the stack.
func (t *clientTransport) CloseIdleConnections() { wire.CloseIdle(t.RoundTripper) }

// String names the stack: "redirect → cookies → retry → transport".
func (t *clientTransport) String() string {
	if s, ok := t.RoundTripper.(fmt.Stringer); ok {
		return s.String()
	}
	return "retrystack"
}
