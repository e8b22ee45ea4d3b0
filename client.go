package retrystack

import (
	"net/http"

	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
)

// Config configures the default stack. The zero value is the safe default:
// policy.Default(), a new cookie jar, up to 10 redirect hops, over
// http.DefaultTransport.
type Config struct {
	// Policy decides the retries; nil: policy.Default().
	Policy *policy.Policy
	// Hooks observe every operation's attempts, retries and pitfalls.
	Hooks engine.Hooks
	// FailOnExhausted turns a retryable status the policy gave up on into
	// an *engine.ExhaustedError.
	FailOnExhausted bool
	// Cookies configures the cookie layer.
	Cookies cookiejar.Config
	// Redirect configures the redirect layer.
	Redirect redirect.Config
	// Transport is NewClient's base RoundTripper; nil: http.DefaultTransport.
	// NewStack builds only the layers: pass the base to Client yourself.
	Transport http.RoundTripper
	// Telemetry, when set, adds the operation span outermost and an attempt
	// span per physical send innermost, and records retries and pitfalls.
	Telemetry *telemetry.Telemetry
}

// NewStack returns the default stack, redirect → cookies → retry (with
// Telemetry: telemetry → redirect → cookies → retry → attempt-telemetry),
// or the first configuration error (a *policy.ConfigError or a middleware
// error).
func NewStack(cfg Config) (middleware.Stack, error) {
	p := policy.Default()
	if cfg.Policy != nil {
		p = *cfg.Policy
	}
	hooks := cfg.Hooks
	if cfg.Telemetry != nil {
		hooks = engine.JoinHooks(hooks, cfg.Telemetry.Hooks())
	}
	e, err := engine.New(engine.Config{Policy: p, Hooks: hooks, FailOnExhausted: cfg.FailOnExhausted})
	if err != nil {
		return middleware.Stack{}, err
	}
	layers := []middleware.Layer{redirect.Layer(cfg.Redirect), cookiejar.Layer(cfg.Cookies), e.Layer()}
	if t := cfg.Telemetry; t != nil {
		layers = append(append([]middleware.Layer{t.Operation()}, layers...), t.Attempt())
	}
	return middleware.NewStack(layers...)
}

// NewClient returns an *http.Client over the default stack.
func NewClient(cfg Config) (*http.Client, error) {
	s, err := NewStack(cfg)
	if err != nil {
		return nil, err
	}
	return Client(s, cfg.Transport), nil
}

// Client returns an *http.Client that sends through s over base (nil:
// http.DefaultTransport), with the client's own redirect following and
// cookie jar off so nothing runs twice.
func Client(s middleware.Stack, base http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     s.Then(base),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
