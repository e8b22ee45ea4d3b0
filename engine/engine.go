package engine

import (
	"context"
	"time"

	"github.com/retrystack/retrystack/policy"
)

// Config configures an Engine. The zero value is invalid: Policy is
// required (start from a preset such as policy.Default()).
type Config struct {
	Policy policy.Policy
	Hooks  Hooks
	// FailOnExhausted returns an *ExhaustedError, instead of the last
	// response, when the policy wanted to retry a status but could not.
	FailOnExhausted bool
}

// Engine runs operations under one policy. It is safe for concurrent use.
type Engine struct {
	p               policy.Policy
	hooks           Hooks
	failOnExhausted bool

	// now and sleep are replaced by tests; sleep waits for d unless ctx
	// ends first, and then returns ctx's error.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns an engine for cfg, or the policy's *policy.ConfigError.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	return &Engine{
		p:               cfg.Policy,
		hooks:           cfg.Hooks,
		failOnExhausted: cfg.FailOnExhausted,
		now:             time.Now,
		sleep:           sleep,
	}, nil
}

// Policy returns the engine's policy.
func (e *Engine) Policy() policy.Policy { return e.p }

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
