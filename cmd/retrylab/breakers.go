package main

import (
	"strconv"
	"sync"
	"time"

	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/policy"
)

// breakerRows put a circuit breaker outside and inside the retry layer:
// the order decides what it counts, operations or attempts.
var breakerRows = []scenario{
	{
		id:     "breaker/outside-retry",
		setup:  "breaker (opens after 5 failures, 1 s) outside the retry layer (3 attempts, no waits); always 503; 10 GETs, the subject the last",
		preset: "default", tune: noWaits, stack: []string{"breaker", "redirect", "cookies", "retry"},
		breaker: fiveFailures,
		run:     tenGETs,
		want:    expect{"3,3,3,3,3,0,0,0,0,0", "error", "circuit-open", "fast_failed=5"},
	},
	{
		id:     "breaker/inside-retry",
		setup:  "the same breaker inside the retry layer, where it counts attempts; 10 GETs, the subject the last",
		preset: "default", tune: noWaits, stack: []string{"redirect", "cookies", "retry", "breaker"},
		breaker: fiveFailures,
		run:     tenGETs,
		want:    expect{"3,2,0,0,0,0,0,0,0,0", "error", "circuit-open", "fast_failed=8"},
	},
	{
		id:     "breaker/half-open-recovers",
		setup:  "breaker/outside-retry's breaker, opened by five 503s; the open time passes (injected clock) and the server answers 200; 3 GETs, the first the half-open probe",
		preset: "default", tune: noWaits, stack: []string{"breaker", "redirect", "cookies", "retry"},
		breaker: fiveFailures,
		run: func(t *trial) {
			for range 5 {
				t.send("GET", "/s/503", "")
			}
			t.forget()
			t.clock.add(1100 * time.Millisecond) // past 1 s + the 10 % jitter
			for range 3 {
				t.send("GET", "/s/200", "")
			}
		},
		want: expect{"1,1,1", "200", "success", "-"},
	},
}

// noWaits resends at once, outside any budget.
func noWaits(p *policy.Policy) { p.Backoff, p.Budget = policy.Backoff{}, nil }

// fiveFailures is the rows' breaker, on the trial's clock.
func fiveFailures(t *trial) breaker.Config {
	return breaker.Config{Consecutive: 5, OpenFor: time.Second, Now: t.clock.now}
}

func tenGETs(t *trial) {
	for range 10 {
		t.send("GET", "/s/503", "")
	}
	t.subject = len(t.ops) - 1
	fast := 0
	for _, o := range t.ops {
		if o.requests == 0 && o.result == "error" {
			fast++
		}
	}
	t.extra["fast_failed"] = strconv.Itoa(fast)
}

// labClock is a trial's injectable time: real time plus what a row adds.
type labClock struct {
	mu    sync.Mutex
	ahead time.Duration
}

func (c *labClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

func (c *labClock) add(d time.Duration) {
	c.mu.Lock()
	c.ahead += d
	c.mu.Unlock()
}
