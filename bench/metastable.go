package bench

import (
	"net/http"
	"slices"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/testkit/overload"
	"github.com/retrystack/retrystack/limit"
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
// defaults and with its throttle, breaker or concurrency limit (fixed and
// adaptive), and each peer at its defaults and in the resilient
// configurations its docs recommend (failsafe-go's with its adaptive
// limiter too). Each takes the attempt timeout; 0 is none.
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
	// The limit layer inside the retry layer, fixed (metaLimit) and
	// adaptive (from 20, between 1 and 1 000, Envoy's gradient); a request
	// waits for room within its attempt's time.
	{"retrystack+limit", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		s, err := withLayer(attemptTimeout(to), limit.Layer(limit.Config{Limit: metaLimit}))
		return s.Then(svc), err
	}},
	{"retrystack+limit (adaptive)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		s, err := withLayer(attemptTimeout(to), limit.Layer(limit.Config{Limit: 20, Adaptive: true}))
		return s.Then(svc), err
	}},
	{"go-retryablehttp", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		c := retryablehttp.NewClient() // RetryMax 4, backoff 1 s to 30 s: its defaults
		c.HTTPClient = &http.Client{Transport: svc, Timeout: to}
		c.Logger = nil
		return &retryablehttp.RoundTripper{Client: c}, nil
	}},
	{"failsafe-go", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return failsafehttp.NewRoundTripper(svc, append([]failsafe.Policy[*http.Response]{failsafehttp.NewRetryPolicyBuilder().Build()}, perAttempt(to)...)...), nil
	}},
	{"failsafe-go (budget, breaker)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return failsafeGuarded(svc, false, perAttempt(to)...), nil
	}},
	// failsafe-go's adaptive concurrency limiter at its defaults (limits
	// 1 to 200, starting at 20; no queueing: an attempt past the limit is
	// refused), inside its guarded retry policy as its docs compose it.
	{"failsafe-go (budget, breaker, adaptive limiter)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return failsafeGuarded(svc, false, append([]failsafe.Policy[*http.Response]{adaptivelimiter.NewWithDefaults[*http.Response]()}, perAttempt(to)...)...), nil
	}},
	{"retry-go", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return &retryGo{next: timeoutRT(svc, to)}, nil
	}},
	{"retry-go (throttle)", func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		return retryGoThrottled(timeoutRT(svc, to), false), nil
	}},
}

// perAttempt is failsafe-go's timeout of each attempt; none for 0.
func perAttempt(to time.Duration) []failsafe.Policy[*http.Response] {
	if to <= 0 {
		return nil
	}
	return []failsafe.Policy[*http.Response]{timeout.New[*http.Response](to)}
}

// timeoutRT gives each request through svc a timeout of to; none for 0.
func timeoutRT(svc http.RoundTripper, to time.Duration) http.RoundTripper {
	if to <= 0 {
		return svc
	}
	return overload.AttemptTimeout(svc, to)
}

// metaLimit is the fixed limit of retrystack's limit layer in the
// metastable and fleet experiments: a little above the 90 attempts the
// experiment's single client has in flight at 600 operations a second
// (150 ms each), below the service's 150 workers. Each client of a fleet
// has its own, so a fleet's clients are limited each to 100: no limit at
// all for small ones.
const metaLimit = 100

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
	// FleetWarmupTime is the warm-up at the real rate just before the
	// trigger, after any other.
	FleetWarmupTime = time.Second
	// FleetCredit is the full budget window every client has run before
	// the trigger: at the real rate (WarmRealTime), or compressed
	// (WarmCompressed: its operations sent back to back before the run,
	// overload.Experiment.Credit), so that each budget and throttle holds
	// what 10 s of the load would have left it.
	FleetCredit = 10 * time.Second
	// FleetAfter is the run after the 1 s trigger.
	FleetAfter = 10 * time.Second
)

// A FleetWarmup is how the fleet's clients warm up before the trigger.
type FleetWarmup string

// The warm-ups: a full budget window at the real rate, then the 1 s one
// (the run takes 10 s longer); the window compressed (FleetCredit) before
// the 1 s one; the 1 s one alone.
const (
	WarmRealTime   FleetWarmup = "10 s real-time"
	WarmCompressed FleetWarmup = "10 s compressed"
	WarmShort      FleetWarmup = "1 s"
)

// FleetExperiment is the run at rate operations a second after warm.
func FleetExperiment(rate float64, warm FleetWarmup) overload.Experiment {
	e := overload.Experiment{
		Rate: rate, Warmup: FleetWarmupTime, Trigger: time.Second, After: FleetAfter,
		TriggerCapacity: 0.4, Grace: metaAttempt,
	}
	switch warm {
	case WarmRealTime:
		e.Warmup += FleetCredit
	case WarmCompressed:
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

// FleetLibs are the clients of the fleet experiment: retrystack with every
// retry budget of the frontier (Rules: its defaults first), then the
// metastable experiment's others but the naive one (retrystack's layers,
// the peers).
var FleetLibs = append(slices.Clone(Rules), Overloaders[2:]...)

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
