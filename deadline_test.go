package retrystack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/policy"
)

// newServer starts a fault server that the test closes.
func newServer(t *testing.T) *faultserver.Server {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// sepKey returns the query suffix that adds key to path.
func sepKey(path, key string) string {
	if strings.Contains(path, "?") {
		return "&key=" + url.QueryEscape(key)
	}
	return "?key=" + url.QueryEscape(key)
}

// requests waits until srv is idle and counts the requests it saw for key.
func requests(t *testing.T, srv *faultserver.Server, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatalf("server never went idle: %v", err)
	}
	n := 0
	for _, e := range srv.Log() {
		if e.Key == key {
			n++
		}
	}
	return n
}

// unreported labels an error that carries no report.
const unreported policy.StopReason = "(unreported error)"

// stopOf returns the stop reason of an operation that ended with resp or
// err, its body read.
func stopOf(resp *http.Response, err error) policy.StopReason {
	rep := engine.ReportFrom(err)
	if err == nil {
		rep = engine.ReportOf(resp)
	}
	if rep == nil {
		return unreported
	}
	return rep.Stop
}

// TestDeadlineOverrun runs each scenario many times under a 100 ms deadline
// (Policy.Timeout or the caller's context) and measures how long after the
// deadline the caller had its answer, body included. It asserts only a
// generous bound, which a missing deadline would break and scheduler noise
// would not; -v prints the distribution docs/reliability.md records.
func TestDeadlineOverrun(t *testing.T) {
	const (
		perScenario = 100
		concurrency = 20
		deadline    = 100 * time.Millisecond
		bound       = time.Second
	)
	srv := newServer(t)
	refuse := make([]faultserver.H2Fault, 100*perScenario) // every stream the scenario can open
	for i := range refuse {
		refuse[i] = faultserver.H2Refuse
	}
	h2, err := faultserver.NewH2(faultserver.H2Config{Faults: refuse})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()

	loop := func(p *policy.Policy) { // retry until time, not attempts, runs out
		p.MaxAttempts = 10_000
		p.Backoff = policy.Backoff{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond}
	}
	waitsOrDeadline := []policy.StopReason{policy.StopDeadline, policy.StopWaitExceedsBudget}
	scenarios := []struct {
		name       string
		path       string
		h2         bool
		fromCaller bool // the deadline is the context's, not Policy.Timeout
		adjust     func(*policy.Policy)
		stops      []policy.StopReason // the stop reasons allowed
	}{
		{name: "slow headers", path: "/slow/headers?delay=3s", stops: []policy.StopReason{policy.StopDeadline}},
		{name: "slow headers, caller's deadline", path: "/slow/headers?delay=3s", fromCaller: true, stops: []policy.StopReason{policy.StopDeadline}},
		{name: "slow headers, 30 ms attempts retried", path: "/slow/headers?delay=3s", stops: waitsOrDeadline,
			adjust: func(p *policy.Policy) { loop(p); p.AttemptTimeout = 30 * time.Millisecond }},
		{name: "slow body", path: "/slow/body?delay=3s", stops: []policy.StopReason{policy.StopDeadline}},
		// Only the caller's context bounds the body: the read fails at its
		// deadline, but as the context's own error, without a report.
		{name: "slow body, caller's deadline", path: "/slow/body?delay=3s", fromCaller: true, stops: []policy.StopReason{policy.StopDeadline}},
		{name: "503, Retry-After past the deadline", path: "/s/503?retry-after=5", stops: []policy.StopReason{policy.StopWaitExceedsBudget}},
		{name: "connection resets, backoff", path: "/abort?reset=1", adjust: loop, stops: waitsOrDeadline},
		{name: "503 loop, backoff", path: "/s/503", adjust: loop, stops: waitsOrDeadline},
		{name: "503 loop, backoff, caller's deadline", path: "/s/503", fromCaller: true, adjust: loop, stops: waitsOrDeadline},
		{name: "h2c streams always refused", path: "/", h2: true, stops: []policy.StopReason{policy.StopDeadline}},
	}

	var all []time.Duration
	for _, sc := range scenarios {
		p := policy.Default()
		p.Budget = nil // deadlines under test, not the budget
		if sc.adjust != nil {
			sc.adjust(&p)
		}
		if !sc.fromCaller {
			p.Timeout = deadline
		}
		tr := &http.Transport{MaxIdleConnsPerHost: concurrency}
		base := srv.URL()
		if sc.h2 {
			tr = &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			base = h2.URL()
		}
		client, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}

		overruns := make([]time.Duration, perScenario)
		stops := make([]policy.StopReason, perScenario)
		var wg sync.WaitGroup
		next := make(chan int)
		for range concurrency {
			wg.Go(func() {
				for i := range next {
					overruns[i], stops[i] = overrun(client, base+sc.path, deadline, sc.fromCaller)
				}
			})
		}
		for i := range perScenario {
			next <- i
		}
		close(next)
		wg.Wait()
		client.CloseIdleConnections()

		seen := map[policy.StopReason]int{}
		for _, s := range stops {
			seen[s]++
			if !slices.Contains(sc.stops, s) {
				t.Errorf("%s: stop %q, want one of %v", sc.name, s, sc.stops)
			}
		}
		early := 0
		for i, o := range overruns {
			if o < 0 {
				early++
				overruns[i] = 0
			}
		}
		slices.Sort(overruns)
		all = append(all, overruns...)
		t.Logf("%-38s p50 %6.1fms  p99 %6.1fms  max %6.1fms  ended before the deadline %3d/%d  stops %v",
			sc.name, ms(quantile(overruns, 50)), ms(quantile(overruns, 99)), ms(overruns[len(overruns)-1]), early, perScenario, seen)
		if worst := overruns[len(overruns)-1]; worst > bound {
			t.Errorf("%s: an operation returned %v after its deadline (bound %v)", sc.name, worst, bound)
		}
	}
	slices.Sort(all)
	t.Logf("%-38s p50 %6.1fms  p99 %6.1fms  max %6.1fms  (%d operations, %d cores, %s)", "all",
		ms(quantile(all, 50)), ms(quantile(all, 99)), ms(all[len(all)-1]), len(all), runtime.NumCPU(), runtime.Version())
}

// overrun sends one GET under a deadline and returns how long after it the
// caller had the whole answer (negative: before), and the stop reason.
func overrun(client *http.Client, url string, deadline time.Duration, fromCaller bool) (time.Duration, policy.StopReason) {
	ctx := context.Background()
	end := time.Now().Add(deadline)
	if fromCaller {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body) // the answer includes its body
		resp.Body.Close()
	}
	stop := stopOf(resp, err)
	if stop == unreported {
		stop = policy.StopReason(fmt.Sprintf("(unreported error: %v)", err))
	}
	return time.Since(end), stop
}

// quantile returns the q-th percentile of sorted d (nearest rank).
func quantile(d []time.Duration, q int) time.Duration {
	i := (len(d)*q + 99) / 100
	return d[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Cancellation stops the operation where it is, and nothing is sent after
// it: not during a backoff wait, not during an attempt, not during the body
// read. (No goroutine of the stack outlives the call either: TestMain's
// goleak check.)
func TestCancellationSendsNothingMore(t *testing.T) {
	srv := newServer(t)
	for _, tt := range []struct {
		name string
		path string
		// cancelWhen returns once the operation is where the cancellation
		// should land; retrying is closed when the engine decides a retry.
		cancelWhen func(key string, retrying <-chan struct{})
		body       bool // the headers arrive: cancel during the body read
	}{
		{name: "during a backoff wait", path: "/s/503", cancelWhen: func(_ string, retrying <-chan struct{}) { <-retrying }},
		{name: "during an attempt", path: "/slow/headers?delay=3s", cancelWhen: func(key string, _ <-chan struct{}) {
			for spin := time.Now(); srv.Stats("/slow/headers", key).Requests == 0 && time.Since(spin) < time.Minute; {
				runtime.Gosched()
			}
		}},
		{name: "during the body read", path: "/slow/body?delay=3s", body: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := t.Name()
			p := policy.Default()
			// A wait of seconds (the backoff cap, halved by this jitter): a
			// cancellation that did not end it would let a second request
			// through, and the count below would catch it.
			p.Backoff.Base, p.Rand = 40*time.Second, func() float64 { return 0.5 }
			retrying := make(chan struct{})
			var once sync.Once
			client, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: &http.Transport{},
				Hooks: engine.Hooks{OnRetry: func(engine.Event) { once.Do(func() { close(retrying) }) }}})
			if err != nil {
				t.Fatal(err)
			}
			defer client.CloseIdleConnections()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelWhen != nil {
				go func() { tt.cancelWhen(key, retrying); cancel() }()
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL()+tt.path+sepKey(tt.path, key), nil)
			resp, err := client.Do(req)
			if tt.body {
				if err != nil {
					t.Fatalf("headers: %v", err)
				}
				cancel()
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			} else if stop := stopOf(resp, err); stop != policy.StopCancelled {
				t.Errorf("stop %q, want %q", stop, policy.StopCancelled)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			if n := requests(t, srv, key); n != 1 {
				t.Errorf("the server saw %d requests, want 1: a request was sent after the cancellation", n)
			}
		})
	}
}
