package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/policy"
	"golang.org/x/net/http/httpguts"
)

// Config configures an Engine. The zero value is invalid: Policy is
// required (start from a preset such as policy.Default()).
type Config struct {
	Policy policy.Policy
	Hooks  Hooks
	// FailOnExhausted returns an *ExhaustedError, instead of the last
	// response, when the policy wanted to retry a status but could not.
	FailOnExhausted bool
	// Layer labels the engine's reports and telemetry when retries nest:
	// "http" (the default) for request retries, "stream" for a stream
	// operation around them.
	Layer string
	// Prepare, when set, rebuilds each attempt's request before it is sent
	// (as Codex's make_req does), so a token or a dynamic header can change
	// between attempts. It gets a copy with its own URL and Header, so the
	// caller's request never changes and each attempt starts from it; an
	// error fails the attempt as not sent, and closes its body.
	Prepare func(req *http.Request, attempt int) error
	// RefreshAuth, when set, runs once per operation on a 401: if it
	// succeeds (refreshing credentials that Prepare then uses), the request
	// is sent again at once, whatever the classifier says; if it fails, the
	// 401 is the answer. It must not read the response body. A request it
	// makes with ctx is an operation of its own.
	RefreshAuth func(ctx context.Context, resp *http.Response) error
	// Signals configures the cross-layer protocol (package crosslayer)
	// with the hosts its To names: each retry carries its attempt number,
	// each attempt under a deadline the time left, and a response that
	// says not to be retried stops the operation with the reason
	// "pushback". The zero value speaks it with no host.
	Signals crosslayer.Signals
	// Routes give the HTTP requests they match policies of their own (the
	// first match wins, WithRoute overrides); the others run under
	// Policy. Each route's policy is validated as Policy is.
	Routes []Route
	// ReplayLimit bounds the replay buffer of a request body that has no
	// GetBody and cannot Seek (what aws-sdk-go-v2 and minio-go send): so
	// much of it is kept as it is sent, and a retry sends it again from
	// what was kept; a body that outgrows it is sent once, and the
	// operation stops at its next failure with body-not-replayable. 0
	// means 256 KiB (gRPC's per-request limit); negative is a
	// *policy.ConfigError. A body that can Seek is rewound instead, and
	// keeps nothing.
	ReplayLimit int64
	// ReplayTotal bounds what the engine's operations keep at once (0: 16
	// MiB, gRPC's per-client limit; negative: a *policy.ConfigError): an
	// operation that would pass it keeps nothing more, as if its body had
	// outgrown ReplayLimit.
	ReplayTotal int64
}

// Engine runs operations under one policy. It is safe for concurrent use.
type Engine struct {
	p               policy.Policy
	hooks           Hooks
	failOnExhausted bool
	layer           string
	prepare         func(*http.Request, int) error
	refreshAuth     func(context.Context, *http.Response) error
	detach          bool // a hook or RefreshAuth gets a context: each operation makes its detached one
	signals         crosslayer.Signals
	// the header names of signals, canonical
	attemptHeader, timeoutHeader, shouldRetryHeader string
	routes                                          []route
	attemptValues                                   []string // attemptValue's, by attempt
	replayLimit                                     int
	replay                                          *wire.ReplayBudget // every route's
	pace                                            *pacer             // every route's

	// now and sleep are replaced by tests; sleep waits for d unless ctx
	// ends first, and then returns ctx's error.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns an engine for cfg, or the policy's *policy.ConfigError.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, configerr.Rebase(err, "policy.Policy.", "engine.Config.Policy.")
	}
	switch {
	case cfg.ReplayLimit < 0:
		return nil, &policy.ConfigError{Field: "engine.Config.ReplayLimit", Value: cfg.ReplayLimit, Reason: "must not be negative (0: the default, 256 KiB)"}
	case cfg.ReplayLimit > 1<<30:
		return nil, &policy.ConfigError{Field: "engine.Config.ReplayLimit", Value: cfg.ReplayLimit, Reason: "must be at most 1 GiB (0: the default, 256 KiB)"}
	case cfg.ReplayTotal < 0:
		return nil, &policy.ConfigError{Field: "engine.Config.ReplayTotal", Value: cfg.ReplayTotal, Reason: "must not be negative (0: the default, 16 MiB)"}
	}
	layer := cfg.Layer
	if layer == "" {
		layer = "http"
	}
	e := &Engine{
		p:               cfg.Policy,
		hooks:           cfg.Hooks,
		failOnExhausted: cfg.FailOnExhausted,
		layer:           layer,
		prepare:         cfg.Prepare,
		refreshAuth:     cfg.RefreshAuth,
		signals:         cfg.Signals,
		now:             time.Now,
		sleep:           sleep,
		detach:          cfg.Hooks.OnAttempt != nil || cfg.Hooks.OnRetry != nil || cfg.Hooks.OnPitfall != nil || cfg.RefreshAuth != nil,
	}
	e.attemptHeader, e.timeoutHeader, e.shouldRetryHeader = cfg.Signals.Names()
	e.attemptValues = attemptValues(cfg.Policy.MaxAttempts)
	e.replayLimit, e.replay = 256<<10, wire.NewReplayBudget(16<<20)
	e.pace = newPacer(func() time.Time { return e.now() }) // e.now, as tests may set it
	if cfg.ReplayLimit > 0 {
		e.replayLimit = int(cfg.ReplayLimit)
	}
	if cfg.ReplayTotal > 0 {
		e.replay = wire.NewReplayBudget(cfg.ReplayTotal)
	}
	if err := checkSignals(cfg.Signals, e.attemptHeader, e.timeoutHeader, e.shouldRetryHeader); err != nil {
		return nil, err
	}
	routes, err := newRoutes(e, cfg.Routes)
	if err != nil {
		return nil, err
	}
	e.routes = routes
	return e, nil
}

// checkSignals refuses header names net/http would refuse to send (every
// request would fail) and two signals under one name (one would overwrite
// the other).
func checkSignals(s crosslayer.Signals, attempt, timeout, shouldRetry string) error {
	if s.Off {
		return nil
	}
	fields := [...]struct{ field, set, name string }{
		{"engine.Config.Signals.Attempt", s.Attempt, attempt},
		{"engine.Config.Signals.Timeout", s.Timeout, timeout},
		{"engine.Config.Signals.ShouldRetry", s.ShouldRetry, shouldRetry},
	}
	for i, f := range fields {
		if !httpguts.ValidHeaderFieldName(f.name) {
			return &policy.ConfigError{Field: f.field, Value: f.set, Reason: "is not a valid header name (RFC 9110 token characters; empty: the default name)"}
		}
		for _, prev := range fields[:i] {
			if prev.name == f.name {
				return &policy.ConfigError{Field: f.field, Value: f.set, Reason: "is also " + prev.field + "'s name: give each signal its own header"}
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attemptValues are the attempt header's values of the first attempts
// under a policy of max attempts, by attempt (from 2).
func attemptValues(max int) []string {
	v := make([]string, min(max, 16)+1)
	for n := 2; n < len(v); n++ {
		v[n] = protocol.AttemptValue(n, max)
	}
	return v
}
