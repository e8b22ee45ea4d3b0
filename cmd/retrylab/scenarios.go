package main

import (
	"strconv"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/policy"
)

// hiddenResend explains rows where net/http resends by itself.
const hiddenResend = "net/http resends a refused or GOAWAY'd HTTP/2 stream by itself: one call, two streams on the wire"

// get is the run of a row that sends one GET.
func get(path string) func(*trial) {
	return func(t *trial) { t.send("GET", path, "") }
}

// recordProcessed notes how many writes a route performed for the trial.
func recordProcessed(t *trial, name, route string) {
	t.extra[name] = strconv.Itoa(t.srv.Stats(route, t.key).Processed)
}

// fixedRand pins the jitter, so waits are the same on every run.
func fixedRand(r float64) func(*policy.Policy) {
	return func(p *policy.Policy) { p.Rand = func() float64 { return r } }
}

// tune applies several changes to a policy in order.
func tune(fs ...func(*policy.Policy)) func(*policy.Policy) {
	return func(p *policy.Policy) {
		for _, f := range fs {
			f(p)
		}
	}
}

// scenarios are the lab's rows, in the order they print.
var scenarios = slicesConcat(seed000, seed001, seed002, seed003, seed004, chainRows, rateLimitRows, routeRows, breakerRows, hedgeRows, limitRows, chaosRows, writeRows, fieldRows, overloadRows, fleetRows, loneRows, baseScenarios, fixes)

func slicesConcat(groups ...[]scenario) []scenario {
	var out []scenario
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// baseScenarios show what net/http does with no retry layer at all.
var baseScenarios = []scenario{
	{
		id:     "base/get-503",
		setup:  "no retry layer; GET /s/503: the 503 comes back as a response, not an error (the Ok(503) trap)",
		preset: "none", stack: []string{},
		run:  get("/s/503"),
		want: expect{"1", "503", "-", "-"},
	},
	{
		id:     "base/error-for-status-503",
		setup:  "error-for-status layer; GET /s/503: the final 503 becomes a typed error",
		preset: "none", stack: []string{"error-for-status"},
		run:  get("/s/503"),
		want: expect{"1", "error", "-", "-"},
	},
	{
		id:     "base/get-abort",
		setup:  "no retry layer; GET /abort on a fresh connection: the server closes it without a response",
		preset: "none", stack: []string{},
		run:  get("/abort"),
		want: expect{"1", "error", "-", "-"},
	},
	{
		id:     "base/post-orders",
		setup:  "no retry layer; POST /orders (written, then 503)",
		preset: "none", stack: []string{},
		run: func(t *trial) {
			t.send("POST", "/orders", `{"item":1}`)
			recordProcessed(t, "orders_written", "/orders")
		},
		want: expect{"1", "503", "-", "orders_written=1"},
	},
	{
		id:     "base/login-then-me",
		setup:  "no cookie layer; POST /login (503 + Set-Cookie lb=node-2), then GET /me: nothing was stored",
		preset: "none", stack: []string{},
		run: func(t *trial) {
			t.send("POST", "/login", "user=a")
			_, body, _ := t.send("GET", "/me", "")
			t.extra["me_cookie"] = body
		},
		want: expect{"1,1", "503", "-", "me_cookie="},
	},
	{
		id:     "base/redirect-not-followed",
		setup:  "no redirect layer, and the client's own CheckRedirect is off; GET /redirect/302/1",
		preset: "none", stack: []string{},
		run:  get("/redirect/302/1"),
		want: expect{"1", "302", "-", "-"},
	},
	{
		id:     "base/attempt-timeout-slow-headers",
		setup:  "policy.Default() with one attempt of at most 50 ms (Policy.AttemptTimeout); headers delayed until the client gives up",
		preset: "default", tune: func(p *policy.Policy) { p.MaxAttempts, p.AttemptTimeout = 1, 50*time.Millisecond },
		stack: []string{"retry"},
		run:   get("/slow/headers?delay=1h"),
		want:  expect{"1", "error", "attempts-exhausted", "-"},
	},
	{
		id:     "base/h2-get-refused-1",
		setup:  "no retry layer, h2c; the server refuses the first stream; GET",
		preset: "none", stack: []string{},
		h2:   []faultserver.H2Fault{faultserver.H2Refuse},
		run:  get("/"),
		want: expect{"2", "200", "-", "-"},
		note: hiddenResend + ".",
	},
	{
		id:     "base/h2-post-refused-1",
		setup:  "no retry layer, h2c; the server refuses the first stream; POST with a replayable body",
		preset: "none", stack: []string{},
		h2:   []faultserver.H2Fault{faultserver.H2Refuse},
		run:  func(t *trial) { t.send("POST", "/", "payload") },
		want: expect{"2", "200", "-", "-"},
		note: hiddenResend + ", a POST included when its body can be replayed.",
	},
	{
		id:     "base/h2-get-goaway",
		setup:  "no retry layer, h2c; the server answers the first stream with GOAWAY(NO_ERROR) below it; GET",
		preset: "none", stack: []string{},
		h2:   []faultserver.H2Fault{faultserver.H2GoAway},
		run:  get("/"),
		want: expect{"2", "200", "-", "-"},
		note: hiddenResend + ", on a new connection.",
	},
}

// pythonJitter keeps seed 001's rows short: its full jitter is pinned at
// r = 0.1, so four attempts wait 50, 100 and 200 ms instead of up to 3.5 s.
var pythonJitter = fixedRand(0.1)

// seed001 reproduces seed 001's hand-written Python client.
var seed001 = []scenario{
	{
		id:     "seed001/flaky-retry-after",
		setup:  "preset python; GET where the server answers 503, 503, 200 with Retry-After: 0.2",
		preset: "python", tune: pythonJitter,
		run:  get("/fail/2/503?retry-after=0.2"),
		want: expect{"3", "200", "success", "planned_waits_ms=200,200"},
	},
	{
		id:     "seed001/retry-after-beyond-budget",
		setup:  "preset python, total budget 10 s; 503 with Retry-After: 30",
		preset: "python", tune: tune(pythonJitter, func(p *policy.Policy) { p.Timeout = 10 * time.Second }),
		run: func(t *trial) {
			t.recordElapsed = true
			t.send("GET", "/s/503?retry-after=30", "")
		},
		want: expect{"1", "503", "wait-exceeds-budget", "elapsed_under_ms=1000"},
	},
	{
		id:     "seed001/post-503",
		setup:  "preset python; POST /s/503",
		preset: "python", tune: pythonJitter,
		run:  func(t *trial) { t.send("POST", "/s/503", "order=1") },
		want: expect{"1", "503", "not-idempotent|non-retryable", "-"},
	},
	{
		id:     "seed001/get-404",
		setup:  "preset python; GET returns 404",
		preset: "python", tune: pythonJitter,
		run:  get("/s/404"),
		want: expect{"1", "404", "non-retryable", "-"},
	},
	{
		id:     "seed001/attempts-4",
		setup:  "preset python, attempts 4; GET /s/503",
		preset: "python", tune: tune(pythonJitter, func(p *policy.Policy) { p.MaxAttempts = 4 }),
		run:  get("/s/503"),
		want: expect{"4", "503", "attempts-exhausted", "-"},
	},
}

// node is seed 004's preset with its random value fixed at 0.5.
func node(fs ...func(*policy.Policy)) func(*policy.Policy) {
	return tune(append([]func(*policy.Policy){fixedRand(0.5)}, fs...)...)
}

// cancelOnRetry cancels the trial when the first retry is decided, before
// its wait starts; cancelDuringWait cancels once the wait is under way.
func cancelOnRetry(t *trial) engine.Hooks {
	return engine.Hooks{OnRetry: func(engine.Event) { t.cancel() }}
}

// cancelDuringWait cancels from another goroutine as the wait begins: it
// runs within microseconds, the wait lasts 25 ms. (The engine's unit tests
// cancel inside the wait on a virtual clock, with no timing at all.)
func cancelDuringWait(t *trial) engine.Hooks {
	return engine.Hooks{OnRetry: func(engine.Event) { go t.cancel() }}
}

// seed004 reproduces seed 004's careful GET-only Node client.
var seed004 = []scenario{
	{
		id:     "seed004/503-503-200",
		setup:  "preset node (3 attempts, total 4000 ms, attempt 1000 ms, base 50, cap 200, random fixed at 0.5)",
		preset: "node", tune: node(),
		run:  get("/fail/2/503"),
		want: expect{"3", "200", "success", "planned_waits_ms=25,50"},
	},
	{
		id: "seed004/always-404", setup: "preset node; always 404", preset: "node", tune: node(),
		run: get("/s/404"), want: expect{"1", "404", "non-retryable", "-"},
	},
	{
		id: "seed004/always-501", setup: "preset node; always 501", preset: "node", tune: node(),
		run: get("/s/501"), want: expect{"1", "501", "non-retryable", "-"},
	},
	{
		id: "seed004/always-503", setup: "preset node; always 503", preset: "node", tune: node(),
		run: get("/s/503"), want: expect{"3", "503", "attempts-exhausted", "-"},
	},
	{
		id: "seed004/503-max-attempts-1", setup: "preset node with 1 attempt; 503", preset: "node",
		tune: node(func(p *policy.Policy) { p.MaxAttempts = 1 }),
		run:  get("/s/503"), want: expect{"1", "503", "attempts-exhausted", "-"},
	},
	{
		id: "seed004/429-retry-after-1", setup: "preset node; 429 with Retry-After: 1, then 200", preset: "node", tune: node(),
		run: get("/fail/1/429?retry-after=1"), want: expect{"2", "200", "success", "planned_waits_ms=1000"},
	},
	{
		id: "seed004/retry-after-60-total-1000", setup: "preset node, total 1000 ms; 503 with Retry-After: 60", preset: "node",
		tune: node(func(p *policy.Policy) { p.Timeout = time.Second }),
		run:  get("/s/503?retry-after=60"), want: expect{"1", "503", "wait-exceeds-budget", "-"},
	},
	{
		id: "seed004/retry-after-fraction", setup: "preset node; 503 with Retry-After: 1.5", preset: "node", tune: node(),
		run: get("/s/503?retry-after=1.5"), want: expect{"1", "503", "unsupported-retry-after", "-"},
	},
	{
		id: "seed004/slow-headers", setup: "preset node, attempt 50 ms; headers delayed 250 ms (here: until the client gives up)", preset: "node",
		tune: node(func(p *policy.Policy) { p.AttemptTimeout = 50 * time.Millisecond }),
		run:  get("/slow/headers?delay=1h"), want: expect{"1", "error", "attempt-timeout", "-"},
	},
	{
		id: "seed004/slow-body", setup: "preset node, attempt 50 ms; 200 headers at once, body ends after 250 ms (here: never)", preset: "node",
		tune: node(func(p *policy.Policy) { p.AttemptTimeout = 50 * time.Millisecond }),
		run:  get("/slow/body?delay=1h"), want: expect{"1", "error", "attempt-timeout", "-"},
	},
	{
		id: "seed004/slow-body-total", setup: "preset node, total 50 ms, attempt 1000 ms; same slow body", preset: "node",
		tune: node(func(p *policy.Policy) { p.Timeout, p.AttemptTimeout = 50*time.Millisecond, time.Second }),
		run:  get("/slow/body?delay=1h"), want: expect{"1", "error", "deadline", "-"},
	},
	{
		id: "seed004/cancelled-before", setup: "preset node; context cancelled before the call", preset: "node", tune: node(),
		run: func(t *trial) {
			t.cancel()
			t.send("GET", "/s/200", "")
		},
		want: expect{"0", "error", "cancelled", "-"},
	},
	{
		id: "seed004/cancelled-before-wait", setup: "preset node; cancelled after the first 503, before the wait starts", preset: "node",
		tune: node(), hooks: cancelOnRetry,
		run: get("/s/503"), want: expect{"1", "error", "cancelled", "-"},
	},
	{
		id: "seed004/cancelled-during-wait", setup: "preset node; cancelled during the first wait", preset: "node",
		tune: node(), hooks: cancelDuringWait,
		run: get("/s/503"), want: expect{"1", "error", "cancelled", "-"},
	},
	{
		id: "seed004/post-lost-after-write", setup: "policy.Default(); POST that the server counts, then drops the connection", preset: "default",
		run: func(t *trial) {
			t.send("POST", "/write?drop=1", "amount=10")
			recordProcessed(t, "posts_processed", "/write")
		},
		want: expect{"1", "error", "not-idempotent", "posts_processed=1"},
	},
	{
		id: "seed004/keyed-post-dedup", setup: "policy.Default(); same POST with an Idempotency-Key, server deduplicates by key", preset: "default",
		run: func(t *trial) {
			t.send("POST", "/write?drop=1", "amount=10", "Idempotency-Key", "pay-42")
			recordProcessed(t, "posts_processed", "/write")
		},
		want: expect{"2", "200", "success", "posts_processed=1"},
	},
}
