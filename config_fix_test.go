package retrystack_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/throttle"
)

// Every configuration error names the field, the value and what to do:
// the text a user reads, from the entry point they called.
func TestConfigErrorsSayWhatToDo(t *testing.T) {
	client := func(cfg retrystack.Config) error {
		_, err := retrystack.NewClient(cfg)
		return err
	}
	layer := func(l middleware.Layer) error {
		s, err := retrystack.NewStack(retrystack.Config{})
		if err == nil {
			_, err = s.InsertAfter("retry", l)
		}
		return err
	}
	withPolicy := func(change func(*policy.Policy)) error {
		p := policy.Default()
		change(&p)
		return client(retrystack.Config{Policy: &p})
	}
	tests := []struct {
		name  string
		err   error
		field string
		value string // "" when a setting, not a value, is at fault
		fix   string
	}{
		{"a Policy from its zero value", client(retrystack.Config{Policy: &policy.Policy{Timeout: 10 * time.Second}}),
			"MaxAttempts", "0", "start from policy.Default()"},
		{"attempts", withPolicy(func(p *policy.Policy) { p.MaxAttempts = 20_000 }), "MaxAttempts", "20000", "between 1 and 10000"},
		{"no classifier", withPolicy(func(p *policy.Policy) { p.Classify = nil }), "Classify", "", "start from policy.Default() or policy.Never()"},
		{"jitter", withPolicy(func(p *policy.Policy) { p.Backoff.Jitter = 7 }), "Backoff.Jitter", "7", "use JitterFull, JitterNone or JitterTenPercent"},
		{"attempt timeout", withPolicy(func(p *policy.Policy) { p.AttemptTimeout = -time.Second }), "AttemptTimeout", "-1s", "0: no limit per attempt"},
		{"replay limit", client(retrystack.Config{ReplayLimit: -1}), "ReplayLimit", "-1", "0: the default, 256 KiB"},
		{"budget", second(policy.NewTPSBudget(time.Hour, 10, 0.2)), "policy.NewTPSBudget(ttl)", "1h0m0s", "tower's: 10s"},
		{"redirect hops", client(retrystack.Config{Redirect: redirect.Config{MaxHops: -2}}), "retrystack.Config.Redirect.MaxHops", "-2", "0: the default, 10"},
		{"breaker rate", layer(breaker.Layer(breaker.Config{Rate: 2})), "breaker.Config.Rate", "2", "between 0 and 1"},
		{"breaker window", layer(breaker.Layer(breaker.Config{Window: -time.Second})), "breaker.Config.Window", "-1s", "0: the default, 10s"},
		{"breaker probes", layer(breaker.Layer(breaker.Config{Probes: -1})), "breaker.Config.Probes", "-1", "0: the default, 1"},
		{"hedge delay", layer(hedge.Layer(hedge.Config{Delay: -time.Millisecond})), "hedge.Config.Delay", "-1ms", "0: wait for the Percentile"},
		{"hedge count", layer(hedge.Layer(hedge.Config{MaxHedges: 11})), "hedge.Config.MaxHedges", "11", "between 0 and 10"},
		{"hedge percentile", layer(hedge.Layer(hedge.Config{Percentile: 1.5})), "hedge.Config.Percentile", "1.5", "0: the default, 0.95"},
		{"throttle K", layer(throttle.Layer(throttle.Config{K: 0.5})), "throttle.Config.K", "0.5", "0: the default, 2"},
		{"NewTransport with a redirect policy", second(retrystack.NewTransport(retrystack.Config{Redirect: redirect.Config{MaxHops: 3}})),
			"retrystack.Config.Redirect", "", "set the CheckRedirect of the http.Client above it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ce *policy.ConfigError
			if !errors.As(tt.err, &ce) {
				t.Fatalf("error %v (%T), want a *policy.ConfigError", tt.err, tt.err)
			}
			msg := tt.err.Error()
			want := tt.field + ": "
			if tt.value != "" {
				want = fmt.Sprintf("%s = %s: ", tt.field, tt.value)
			}
			if !strings.Contains(msg, want) || !strings.Contains(msg, tt.fix) {
				t.Errorf("error %q\nwant it to contain %q and the fix %q", msg, want, tt.fix)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }

// Every ConfigError a constructor returns names its field one way: the
// path from the value the caller passed, after its package and type.
func TestConfigErrorFieldsSpelledOneWay(t *testing.T) {
	spelled := regexp.MustCompile(`^(retrystack|engine|policy|hedge|breaker|throttle|redirect|limit|chaos|cookiejar|telemetry|http)\.(Config|Policy|Client|New[A-Za-z]+\([a-zA-Z]+\))(\.[A-Z][A-Za-z]*(\[\d+\])?)*$`)
	_, tps := policy.NewTPSBudget(time.Hour, 10, 0.2)
	_, earned := policy.NewEarnedBudget(2, 2)
	zero := policy.Policy{}
	_, eng := engine.New(engine.Config{Policy: policy.Default(), Routes: []engine.Route{{Name: "a", PathPrefix: "x"}}})
	_, client := retrystack.NewClient(retrystack.Config{Policy: &zero})
	_, stack := retrystack.NewStack(retrystack.Config{Redirect: redirect.Config{MaxHops: -1}})
	_, hedged := middleware.NewStack(hedge.Layer(hedge.Config{Delay: -1}))
	for _, err := range []error{tps, earned, zero.Validate(), eng, client, stack, hedged} {
		ce, ok := errors.AsType[*policy.ConfigError](err)
		if !ok {
			t.Errorf("%v: not a *policy.ConfigError", err)
			continue
		}
		if !spelled.MatchString(ce.Field) || !strings.HasPrefix(err.Error(), "retrystack: ") && !strings.Contains(err.Error(), ": retrystack: ") {
			t.Errorf("field %q, error %q: want the path from the caller's value after its package and type", ce.Field, err)
		}
	}
}
