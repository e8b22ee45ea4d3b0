package retrystack_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
)

// Bad configuration is a typed error when the client is built, never a
// panic, and no client comes back with it.
func TestBadConfigIsATypedError(t *testing.T) {
	withPolicy := func(change func(*policy.Policy)) func() error {
		return func() error {
			p := policy.Default()
			change(&p)
			c, err := retrystack.NewClient(retrystack.Config{Policy: &p})
			if c != nil {
				return fmt.Errorf("a client came back with %v", err)
			}
			return err
		}
	}
	budget := func(ttl time.Duration, minPerSec int, ratio float64) func() error {
		return func() error {
			b, err := policy.NewTPSBudget(ttl, minPerSec, ratio)
			if b != nil {
				return fmt.Errorf("a budget came back with %v", err)
			}
			return err
		}
	}
	// edit changes the default stack; a client is built only from a stack
	// that has no error.
	edit := func(change func(middleware.Stack) (middleware.Stack, error)) func() error {
		return func() error {
			s, err := retrystack.NewStack(retrystack.Config{})
			if err != nil {
				return err
			}
			_, err = change(s)
			return err
		}
	}
	pass := middleware.Layer{Name: "cookies", Wrap: func(next http.RoundTripper) http.RoundTripper { return next }}

	configErr := func(field string) error { return &policy.ConfigError{Field: field} }
	tests := []struct {
		name  string
		build func() error
		want  error // the type to match with errors.As; a ConfigError's Field is compared too
	}{
		{"negative attempts", withPolicy(func(p *policy.Policy) { p.MaxAttempts = -1 }), configErr("retrystack.Config.Policy.MaxAttempts")},
		{"zero attempts", withPolicy(func(p *policy.Policy) { p.MaxAttempts = 0 }), configErr("retrystack.Config.Policy.MaxAttempts")},
		{"attempts above the limit", withPolicy(func(p *policy.Policy) { p.MaxAttempts = 10_000 + 1 }), configErr("retrystack.Config.Policy.MaxAttempts")},
		{"negative attempt timeout", withPolicy(func(p *policy.Policy) { p.AttemptTimeout = -time.Second }), configErr("retrystack.Config.Policy.AttemptTimeout")},
		{"negative total timeout", withPolicy(func(p *policy.Policy) { p.Timeout = -1 }), configErr("retrystack.Config.Policy.Timeout")},
		{"no classifier", withPolicy(func(p *policy.Policy) { p.Classify = nil }), configErr("retrystack.Config.Policy.Classify")},
		{"negative backoff base", withPolicy(func(p *policy.Policy) { p.Backoff.Base = -1 }), configErr("retrystack.Config.Policy.Backoff.Base")},
		{"negative backoff cap", withPolicy(func(p *policy.Policy) { p.Backoff.Cap = -1 }), configErr("retrystack.Config.Policy.Backoff.Cap")},
		{"unknown jitter", withPolicy(func(p *policy.Policy) { p.Backoff.Jitter = 9 }), configErr("retrystack.Config.Policy.Backoff.Jitter")},
		{"negative Retry-After max", withPolicy(func(p *policy.Policy) { p.RetryAfter.Max = -1 }), configErr("retrystack.Config.Policy.RetryAfter.Max")},
		{"zero policy", withPolicy(func(p *policy.Policy) { *p = policy.Policy{} }), configErr("retrystack.Config.Policy.MaxAttempts")},
		{"budget ratio below 0", budget(10*time.Second, 10, -0.1), configErr("policy.NewTPSBudget(ratio)")},
		{"budget ratio above 1000", budget(10*time.Second, 10, 1000.5), configErr("policy.NewTPSBudget(ratio)")},
		{"budget ratio NaN", budget(10*time.Second, 10, math.NaN()), configErr("policy.NewTPSBudget(ratio)")},
		{"budget ratio infinite", budget(10*time.Second, 10, math.Inf(1)), configErr("policy.NewTPSBudget(ratio)")},
		{"budget ttl under a second", budget(time.Millisecond, 10, 0.2), configErr("policy.NewTPSBudget(ttl)")},
		{"budget ttl over a minute", budget(time.Hour, 10, 0.2), configErr("policy.NewTPSBudget(ttl)")},
		{"negative budget reserve", budget(10*time.Second, -1, 0.2), configErr("policy.NewTPSBudget(minPerSec)")},
		{"negative replay limit", func() error {
			c, err := retrystack.NewClient(retrystack.Config{ReplayLimit: -1})
			if c != nil {
				return errors.New("a client came back")
			}
			return err
		}, configErr("retrystack.Config.ReplayLimit")},
		{"negative replay total", func() error {
			c, err := retrystack.NewTransport(retrystack.Config{ReplayTotal: -1})
			if c != nil {
				return errors.New("a transport came back")
			}
			return err
		}, configErr("retrystack.Config.ReplayTotal")},
		{"negative redirect hops", func() error {
			c, err := retrystack.NewClient(retrystack.Config{Redirect: redirect.Config{MaxHops: -1}})
			if c != nil {
				return errors.New("a client came back")
			}
			return err
		}, &middleware.LayerError{}},
		{"zero telemetry", func() error {
			c, err := retrystack.NewClient(retrystack.Config{Telemetry: new(telemetry.Telemetry)})
			if c != nil {
				return errors.New("a client came back")
			}
			return err
		}, &middleware.LayerError{}},
		{"duplicate layer name", edit(func(s middleware.Stack) (middleware.Stack, error) { return s.InsertAfter("retry", pass) }), &middleware.LayerError{}},
		{"unknown layer name", edit(func(s middleware.Stack) (middleware.Stack, error) { return s.Swap("cookies", "cache") }), &middleware.LayerError{}},
		{"layer named transport", edit(func(s middleware.Stack) (middleware.Stack, error) {
			return s.InsertBefore("redirect", middleware.Layer{Name: "transport", Wrap: pass.Wrap})
		}), &middleware.LayerError{}},
		{"nil header function", edit(func(s middleware.Stack) (middleware.Stack, error) {
			return s.InsertBefore("redirect", middleware.HeaderFunc(nil))
		}), &middleware.LayerError{}},
		{"engine with a bad policy", func() error {
			_, err := engine.New(engine.Config{Policy: policy.Policy{MaxAttempts: 1}})
			return err
		}, configErr("engine.Config.Policy.Classify")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic while building: %v", r)
					}
				}()
				err = tt.build()
			}()
			target := reflect.New(reflect.TypeOf(tt.want)) // a **T for errors.As
			if !errors.As(err, target.Interface()) {
				t.Fatalf("error %v (%T), want a %T", err, err, tt.want)
			}
			if want, ok := tt.want.(*policy.ConfigError); ok {
				if got := target.Elem().Interface().(*policy.ConfigError); got.Field != want.Field {
					t.Errorf("ConfigError for %s, want %s: %v", got.Field, want.Field, err)
				}
			}
		})
	}
}

// Extreme values that do build run without a panic at request time and
// end the way the policy says.
func TestExtremeConfigRuns(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name   string
		path   string
		change func(*policy.Policy)
		stop   policy.StopReason
	}{
		{"most attempts", "/fail/1/503", func(p *policy.Policy) { p.MaxAttempts = 10_000 }, policy.StopSuccess},
		{"1 ns timeout", "/s/200", func(p *policy.Policy) { p.Timeout = 1 }, policy.StopDeadline},
		// Default's budget pays for a timeout's retry only from the last
		// second's successes: a new client has none.
		{"1 ns attempt timeout", "/s/200", func(p *policy.Policy) { p.AttemptTimeout = 1 }, policy.StopTimeoutNotRetried},
		{"1 ns attempt timeout, no budget", "/s/200", func(p *policy.Policy) { p.AttemptTimeout, p.Budget = 1, nil }, policy.StopAttemptsExhausted},
		{"1 ns attempt timeout, alone", "/s/200", func(p *policy.Policy) { *p = policy.Alone(); p.AttemptTimeout = 1 }, policy.StopAttemptsExhausted},
		{"longest backoff", "/s/503", func(p *policy.Policy) {
			p.Backoff = policy.Backoff{Base: math.MaxInt64, Jitter: policy.JitterNone}
			p.Timeout = time.Minute
		}, policy.StopWaitExceedsBudget},
		{"longest Retry-After max", "/s/503?retry-after=1000000000000", func(p *policy.Policy) {
			p.RetryAfter.Max = math.MaxInt64
			p.Timeout = time.Minute
		}, policy.StopWaitExceedsBudget},
		{"smallest earned budget", "/s/503", func(p *policy.Policy) { p.Budget, _ = policy.NewEarnedBudget(1e-6, 1) }, policy.StopBudgetExhausted},
		{"budget ratio 1000", "/fail/1/503", func(p *policy.Policy) { p.Budget = presets.Budget(time.Minute, 0, 1000) }, policy.StopBudgetExhausted},
		{"jitter at the top of its range", "/fail/1/503", func(p *policy.Policy) {
			p.Backoff.Base = time.Millisecond
			p.Rand = func() float64 { return math.Nextafter(1, 0) }
		}, policy.StopSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy.Default()
			p.Backoff.Base = time.Nanosecond
			tt.change(&p)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic at request time: %v", r)
				}
			}()
			resp, err := c.Get(srv.URL() + tt.path + sepKey(tt.path, t.Name()))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if stop := stopOf(resp, err); stop != tt.stop {
				t.Errorf("stop %q (error %v), want %q", stop, err, tt.stop)
			}
		})
	}
}
