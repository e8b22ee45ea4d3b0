package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/testkit/overload"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// The metastable-failure experiment (internal/testkit/overload, the lab's
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

// The fleet experiment (issue 35): the metastable experiment's service and
// trigger, its load split evenly over n independent clients, each built
// as a process of its own would build it (its own budget, throttle,
// breaker and pacing state; not its own CPU, scheduler or connection
// pool: every client here is in one process).
const (
	FleetWarmup = time.Second
	// FleetCredit is the full budget window every client has run before
	// the trigger: its operations are sent back to back before the run
	// (overload.Experiment.Credit), so that each budget and throttle holds
	// what 10 s of the load would have left it.
	FleetCredit = 10 * time.Second
	FleetAfter  = 10 * time.Second
)

// FleetExperiment is the run at rate operations a second, with (credit)
// or without a full budget window of warm-up before the 1 s one.
func FleetExperiment(rate float64, credit bool) overload.Experiment {
	e := overload.Experiment{
		Rate: rate, Warmup: FleetWarmup, Trigger: time.Second, After: FleetAfter,
		TriggerCapacity: 0.4, Grace: metaAttempt,
	}
	if credit {
		e.Credit = FleetCredit
	}
	return e
}

// Fleet runs e with n clients of lib.
func Fleet(lib Overloader, n int, e overload.Experiment) (overload.Result, error) {
	svc := overload.NewService(metaWorkers, metaService)
	defer svc.Close()
	clients, err := fleetOf(lib, n, svc)
	if err != nil {
		return overload.Result{}, err
	}
	return e.Run(overload.Fleet(clients), svc), nil
}

// fleetOf builds n clients of lib over svc, each as a process of its own
// would.
func fleetOf(lib Overloader, n int, svc http.RoundTripper) ([]http.RoundTripper, error) {
	clients := make([]http.RoundTripper, n)
	for i := range clients {
		rt, err := lib.New(svc, metaAttempt)
		if err != nil {
			return nil, err
		}
		clients[i] = rt
	}
	return clients, nil
}

// FleetLibs are the clients of the fleet experiment: the overload
// experiment's but the naive one, and retrystack with the budget its
// defaults had before (tower's: a reserve of 10 retries a second per
// client).
var FleetLibs = append([]Overloader{{"retrystack, tower's budget (before)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
	p := attemptTimeout(to)
	b, err := policy.NewTPSBudget(10*time.Second, 10, 0.2)
	p.Budget = b
	if err != nil {
		return nil, err
	}
	return retrystack.NewTransport(retrystack.Config{Policy: p, Transport: svc})
}}}, Overloaders[1:]...)

// SmallClients runs ops operations through each of n clients of lib,
// against a healthy service that answers each request 503 with
// probability fail (at random, from seed) and 200 otherwise, after every
// client has run warm operations (the clients side by side, each one's
// operations back to back: compressed time). It returns the share of the
// measured operations that ended 200.
func SmallClients(lib Overloader, n, warm, ops int, fail float64, seed uint64) (float64, error) {
	clients, err := fleetOf(lib, n, overload.Flaky(fail, seed))
	if err != nil {
		return 0, err
	}
	return overload.Healthy(clients, warm, ops), nil
}
