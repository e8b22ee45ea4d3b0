package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	retry "github.com/avast/retry-go/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/stores/redis"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A Lib builds a client of one library over a transport, at the library's
// defaults but for what Mode changes, or in the resilient configuration its
// docs recommend (Guarded).
type Lib struct {
	Name string
	New  func(tr http.RoundTripper, m Mode) (*http.Client, error)
	// Guarded: a retry budget, throttle or circuit breaker the library
	// ships is on. The retry path's measurement (three sends an
	// operation, every guard off) leaves such a client out.
	Guarded bool
}

// Mode is what a measurement changes in the libraries' defaults.
type Mode struct {
	// ZeroWait sets every wait between attempts to 0, so a run measures the
	// library, not its sleeping.
	ZeroWait bool
	// NoBudget switches retrystack's retry budget off, so every operation
	// of the retry-path benchmark makes all its attempts (the budget would
	// rightly stop retrying a server that fails two times in three).
	NoBudget bool
}

// recording is a tracer provider that samples every span and exports none.
var recording = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))

// Libs are the peers, in the order they print: each at its defaults, and
// retrystack, failsafe-go and retry-go also guarded by what they ship
// (go-retryablehttp ships no budget, throttle or breaker).
var Libs = []Lib{
	{Name: "net/http", New: func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		return &http.Client{Transport: tr}, nil
	}},
	{Name: "retrystack", New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return retrystack.NewClient(retrystack.Config{Policy: defaultPolicy(m), Transport: tr})
	}},
	{Name: "retrystack+otel", New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		tel, err := telemetry.New(telemetry.Config{TracerProvider: recording})
		if err != nil {
			return nil, err
		}
		return retrystack.NewClient(retrystack.Config{Policy: defaultPolicy(m), Transport: tr, Telemetry: tel})
	}},
	{Name: "retrystack (fleet budget)", Guarded: true, New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		p := defaultPolicy(m)
		if !m.NoBudget {
			f, err := processFleet()
			if err != nil {
				return nil, err
			}
			p.Budget, p.RetryAfter.Shared = f, f
		}
		return retrystack.NewClient(retrystack.Config{Policy: p, Transport: tr})
	}},
	{Name: "retrystack+breaker", Guarded: true, New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		s, err := withLayer(defaultPolicy(m), retrystackBreaker())
		return retrystack.Client(s, tr), err
	}},
	{Name: "go-retryablehttp", New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: tr}
		c.Logger = nil // it logs every attempt to stderr by default
		if m.ZeroWait {
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
		}
		return c.StandardClient(), nil
	}},
	{Name: "failsafe-go", New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		b := failsafehttp.NewRetryPolicyBuilder()
		if m.ZeroWait {
			b = b.WithDelay(0)
		}
		return &http.Client{Transport: failsafehttp.NewRoundTripper(tr, b.Build())}, nil
	}},
	{Name: "failsafe-go (budget, breaker)", Guarded: true, New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return &http.Client{Transport: failsafeGuarded(tr, m.ZeroWait)}, nil
	}},
	{Name: "retry-go", New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return &http.Client{Transport: &retryGo{next: tr, zeroWait: m.ZeroWait}}, nil
	}},
	{Name: "retry-go (throttle)", Guarded: true, New: func(tr http.RoundTripper, m Mode) (*http.Client, error) {
		return &http.Client{Transport: retryGoThrottled(tr, m.ZeroWait)}, nil
	}},
	{Name: "otelhttp", New: func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		return &http.Client{Transport: otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(recording))}, nil
	}},
}

// withLayer is retrystack's default stack with l inside the retry layer.
func withLayer(p *policy.Policy, l middleware.Layer) (middleware.Stack, error) {
	s, err := retrystack.NewStack(retrystack.Config{Policy: p})
	if err != nil {
		return s, err
	}
	return s.InsertAfter("retry", l)
}

// retrystackBreaker is breaker.Layer inside the retry layer, where it
// counts attempts as failsafe-go's does below: 5 consecutive failures open
// a host's circuit, for 1 s as failsafe-go's (the default, 5 s, turns the
// metastable experiment's 1 s trigger into 5 s of refusals).
func retrystackBreaker() middleware.Layer {
	return breaker.Layer(breaker.Config{OpenFor: time.Second})
}

// failsafeGuarded is failsafe-go's resilient HTTP client as its docs
// compose one: a retry policy with a retry budget (at most 20 % of the
// executions in flight may be retries), around a circuit breaker that
// opens when 5 of the last 10 attempts failed (an error or a 5xx) and
// lets a trial through after 1 s, around the given inner policies (a
// timeout per attempt, say).
func failsafeGuarded(tr http.RoundTripper, zeroWait bool, inner ...failsafe.Policy[*http.Response]) http.RoundTripper {
	b := failsafehttp.NewRetryPolicyBuilder().WithBudget(budget.New())
	if zeroWait {
		b = b.WithDelay(0)
	}
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(r *http.Response, err error) bool { return err != nil || r.StatusCode >= 500 }).
		WithFailureThresholdRatio(5, 10).WithDelay(time.Second).Build()
	return failsafehttp.NewRoundTripper(tr, append([]failsafe.Policy[*http.Response]{b.Build(), cb}, inner...)...)
}

// retryGoThrottled is retry-go v5 with its token-bucket retry throttle
// (after the AWS SDKs' retry quota: a retry takes 5 tokens of 100, a
// success returns 1, a success after retries 5), one bucket per client.
func retryGoThrottled(tr http.RoundTripper, zeroWait bool) http.RoundTripper {
	return &retryGo{next: tr, zeroWait: zeroWait, throttle: retry.NewFixedTokenBucketThrottle(retry.FixedTokenBucketThrottleConfig{})}
}

// processFleet is the process's one Fleet (stores/redis), as a program
// makes one for all its clients: on the redis-server at REDIS_ADDR
// (127.0.0.1:6379 without it). Its success path is the same whether Redis
// answers or the Fleet has fallen back (an atomic add and the local
// budget's deposit), and no request waits on Redis either way.
var processFleet = sync.OnceValues(func() (*redis.Fleet, error) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	goredis.SetLogger(quietRedis{}) // a missing Redis is the fallback measured, not news
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	return redis.NewFleet(c, redis.FleetConfig{Name: "bench-compare"})
})

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func defaultPolicy(m Mode) *policy.Policy {
	p := policy.Default()
	if m.ZeroWait {
		p.Backoff = policy.Backoff{}
	}
	if m.NoBudget {
		p.Budget = nil
	}
	return &p
}

// retryGo wraps avast/retry-go's Do around a RoundTrip, as its README
// suggests for HTTP: a 5xx is turned into an error to retry.
type retryGo struct {
	next     http.RoundTripper
	zeroWait bool
	throttle retry.ThrottleManager // shared by the client's operations; nil: none
}

var errServer = errors.New("server error")

func (r *retryGo) RoundTrip(req *http.Request) (*http.Response, error) {
	opts := []retry.Option{retry.LastErrorOnly(true), retry.Context(req.Context())}
	if r.zeroWait {
		opts = append(opts, retry.Delay(0), retry.MaxJitter(0), retry.DelayType(retry.FixedDelay))
	}
	if r.throttle != nil {
		opts = append(opts, retry.WithThrottle(r.throttle))
	}
	var last *http.Response
	err := retry.New(opts...).Do(func() error {
		attempt := req
		if last != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return retry.Unrecoverable(err)
			}
			attempt = req.Clone(req.Context())
			attempt.Body = body
		}
		if last != nil { // drained, so its connection is reused
			io.Copy(io.Discard, last.Body)
			last.Body.Close()
			last = nil
		}
		resp, err := r.next.RoundTrip(attempt)
		if err != nil {
			return err
		}
		last = resp
		if resp.StatusCode >= 500 {
			return fmt.Errorf("%w: %d", errServer, resp.StatusCode)
		}
		return nil
	})
	if last != nil && (err == nil || errors.Is(err, errServer)) {
		return last, nil // the last response, like the others
	}
	return nil, err
}

func (r *retryGo) CloseIdleConnections() {
	if c, ok := r.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
