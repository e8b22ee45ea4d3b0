package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/overload"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// The metastable-failure experiment (internal/overload, the lab's
// overload/ rows): a service of 150 workers of 150 ms (1 000 requests a
// second), an open load of 600 operations a second from one client, a 1 s
// trigger at 40 % capacity, attempts that time out after 500 ms.
const (
	metaWorkers = 150
	metaService = 150 * time.Millisecond
	metaAttempt = 500 * time.Millisecond
)

// MetaExperiment is the run: 1 s of warm-up, the trigger, 5 s after.
var MetaExperiment = overload.Experiment{
	Rate: 600, Warmup: time.Second, Trigger: time.Second, After: 5 * time.Second,
	TriggerCapacity: 0.4, Grace: metaAttempt,
}

// An Overloader builds a client of the experiment over the service, each
// attempt timing out after timeout.
type Overloader struct {
	Name string
	New  func(svc http.RoundTripper, timeout time.Duration) (http.RoundTripper, error)
}

// Overloaders are the clients of the experiment: naive ones, retrystack's
// defaults and with its throttle or breaker, and each peer at its defaults
// and in the resilient configuration its docs recommend.
var Overloaders = []Overloader{
	{"naive (4 retries at once)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return overload.Naive(svc, to, 4), nil
	}},
	{"retrystack", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return retrystack.NewTransport(retrystack.Config{Policy: attemptTimeout(to), Transport: svc})
	}},
	{"retrystack+throttle", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		s, err := withLayer(attemptTimeout(to), throttle.Layer(throttle.Config{}))
		return s.Then(svc), err
	}},
	{"retrystack+breaker", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		s, err := withLayer(attemptTimeout(to), retrystackBreaker())
		return s.Then(svc), err
	}},
	{"go-retryablehttp", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		c := retryablehttp.NewClient() // RetryMax 4, backoff 1 s to 30 s: its defaults
		c.HTTPClient = &http.Client{Transport: svc, Timeout: to}
		c.Logger = nil
		return &retryablehttp.RoundTripper{Client: c}, nil
	}},
	{"failsafe-go", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return failsafehttp.NewRoundTripper(svc, failsafehttp.NewRetryPolicyBuilder().Build(), timeout.New[*http.Response](to)), nil
	}},
	{"failsafe-go (budget, breaker)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return failsafeGuarded(svc, false, timeout.New[*http.Response](to)), nil
	}},
	{"retry-go", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return &retryGo{next: overload.AttemptTimeout(svc, to)}, nil
	}},
	{"retry-go (throttle)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return retryGoThrottled(overload.AttemptTimeout(svc, to), false), nil
	}},
}

// attemptTimeout is policy.Default() with a timeout per attempt.
func attemptTimeout(to time.Duration) *policy.Policy {
	p := policy.Default()
	p.AttemptTimeout = to
	return &p
}

// Metastable runs the experiment with lib's client.
func Metastable(lib Overloader, e overload.Experiment) (overload.Result, error) {
	svc := overload.NewService(metaWorkers, metaService)
	defer svc.Close()
	rt, err := lib.New(svc, metaAttempt)
	if err != nil {
		return overload.Result{}, err
	}
	return e.Run(rt, svc), nil
}
