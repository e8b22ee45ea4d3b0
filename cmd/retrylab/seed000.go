package main

import (
	"net/http"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
)

// Classifiers seed 000 adds with classify_fn: they ignore the method, as
// the seed's do.
var (
	retry503 = func(p *policy.Policy) {
		p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify
	}
	retryAnyError = func(p *policy.Policy) {
		p.Classify = policy.Rules{Errors: func(policy.ErrorKind) bool { return true }, Safe: func(*http.Request) bool { return true }}.Classify
	}
	forLocalhost = func(p *policy.Policy) { p.Scope.Hosts = []string{"localhost"} }
)

func maxRetries(n int) func(*policy.Policy) {
	return func(p *policy.Policy) { p.MaxAttempts = n + 1 }
}

func budget(ratio float64) func(*policy.Policy) {
	return func(p *policy.Policy) { p.Budget = presets.Budget(10*time.Second, 10, ratio) }
}

var noBudget = func(p *policy.Policy) { p.Budget = nil }

// threeBudgetGETs is seed 000's budget experiment: three GET /s/503 on one
// client, each allowed 1000 retries.
func threeBudgetGETs(t *trial) {
	for range 3 {
		t.send("GET", "/s/503", "")
	}
}

const (
	goResendsToo = "reqwest: 2 attempts, Ok(200) — the same figure, but in Go the resend is net/http's own, below every layer, and the report counts it as a transparent attempt"
	goResends    = "reqwest: 1 attempt, Err(REFUSED_STREAM). net/http resends a refused stream by itself, below every layer and whatever the policy, so the stack sees success; the report counts the resend as a transparent attempt"
)

// seed000 reproduces reqwest 0.13.5's retry module (seed 000).
var seed000 = []scenario{
	{
		id: "seed000/default-get-503", setup: "preset reqwest-default; GET /s/503",
		preset: "reqwest-default", run: get("/s/503"),
		want: expect{"1", "503", "non-retryable", "-"},
	},
	{
		id: "seed000/default-get-abort", setup: "preset reqwest-default; GET /abort (fresh connection)",
		preset: "reqwest-default", run: get("/abort"),
		want: expect{"1", "error", "non-retryable", "-"},
	},
	{
		id: "seed000/forhost-noclassifier-get-503", setup: "reqwest for_host(127.0.0.1) without classifier; GET /s/503",
		preset: "reqwest-for-host", run: get("/s/503"),
		want: expect{"1", "503", "non-retryable", "-"},
	},
	{
		id: "seed000/forhost-503-get-503", setup: "reqwest for_host(127.0.0.1) + classifier 503=retryable; GET /s/503",
		preset: "reqwest-for-host", tune: retry503, run: get("/s/503"),
		want:     expect{"3", "503", "attempts-exhausted", "-"},
		wantOurs: &expect{"3", "503", "attempts-exhausted", "pitfalls=exhausted-retryable-status"},
	},
	{
		id: "seed000/forhost-503-post-bytes", setup: "same client; POST /s/503 with a replayable body",
		preset: "reqwest-for-host", tune: retry503,
		run:  func(t *trial) { t.send("POST", "/s/503", "bytes") },
		want: expect{"3", "503", "attempts-exhausted", "-"},
	},
	{
		id: "seed000/forhost-503-post-stream", setup: "same client; POST /s/503 with a streaming body (no GetBody)",
		preset: "reqwest-for-host", tune: retry503,
		run:  func(t *trial) { t.stream("POST", "/s/503", "stream") },
		want: expect{"1", "503", "body-not-replayable", "-"},
	},
	{
		id: "seed000/forhost-503-get-fail-once", setup: "same client; GET /fail/1/503",
		preset: "reqwest-for-host", tune: retry503, run: get("/fail/1/503"),
		want: expect{"2", "200", "success", "-"},
	},
	{
		id: "seed000/max5-get-503", setup: "same client with max retries per request 5; GET /s/503",
		preset: "reqwest-for-host", tune: tune(retry503, maxRetries(5)), run: get("/s/503"),
		want: expect{"6", "503", "attempts-exhausted", "-"},
	},
	{
		id:     "seed000/forhost-localhost-get-127",
		setup:  "reqwest for_host(localhost) + 503 classifier; GET http://127.0.0.1/s/503 (scope quirk reproduced)",
		preset: "reqwest-for-host", tune: tune(retry503, forLocalhost), run: get("/s/503"),
		want: expect{"2", "503", "out-of-scope", "-"},
	},
	{
		id: "seed000/forhost-localhost-get-localhost", setup: "same client; GET http://localhost/s/503",
		preset: "reqwest-for-host", tune: tune(retry503, forLocalhost),
		run:  func(t *trial) { t.send("GET", t.srv.LocalhostURL()+"/s/503", "") },
		want: expect{"3", "503", "attempts-exhausted", "-"},
	},
	{
		id: "seed000/anyerror-get-abort", setup: "reqwest for_host + every error retryable; GET /abort",
		preset: "reqwest-for-host", tune: retryAnyError, run: get("/abort"),
		want: expect{"3", "error", "attempts-exhausted", "-"},
	},
	{
		id: "seed000/anyerror-post-abort", setup: "same client; POST /abort with a replayable body (server reads the body, then drops)",
		preset: "reqwest-for-host", tune: retryAnyError,
		run: func(t *trial) {
			t.send("POST", "/abort", "order=1")
			recordProcessed(t, "posts_processed", "/abort")
		},
		want: expect{"3", "error", "attempts-exhausted", "posts_processed=3"},
	},
	{
		id: "seed000/budget-default", setup: "503 classifier, max retries 1000, default budget 0.2; 3 sequential GET /s/503 on one client",
		preset: "reqwest-for-host", tune: tune(retry503, maxRetries(1000)), run: threeBudgetGETs,
		want:     expect{"101,1,1", "503", "budget-exhausted", "-"},
		wantOurs: &expect{"3,1,1", "503", "attempts-exhausted", "-"},
	},
	{
		id:     "seed000/budget-after-successes",
		setup:  "continue on the budget-default client: 20 successful GETs, then one GET /s/503 (server_requests lists all 21 operations; the subject is the final GET)",
		preset: "reqwest-for-host", tune: tune(retry503, maxRetries(1000)),
		run: func(t *trial) {
			threeBudgetGETs(t)
			t.forget()
			for range 20 {
				t.send("GET", "/s/200", "")
			}
			t.send("GET", "/s/503", "")
			t.subject = 20
		},
		want: expect{"1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,5", "503", "budget-exhausted", "-"},
	},
	{
		id: "seed000/budget-extra-load-0", setup: "as budget-default with max_extra_load 0.0",
		preset: "reqwest-for-host", tune: tune(retry503, maxRetries(1000), budget(0)), run: threeBudgetGETs,
		want: expect{"101,1,1", "503", "budget-exhausted", "-"},
	},
	{
		id: "seed000/budget-none", setup: "as budget-default with no budget",
		preset: "reqwest-for-host", tune: tune(retry503, maxRetries(1000), noBudget), run: threeBudgetGETs,
		want:     expect{"1001,1001,1001", "503", "attempts-exhausted", "-"},
		wantOurs: &expect{"3,1,1", "503", "attempts-exhausted", "-"},
	},
	{
		id: "seed000/h2-default-get-refused-1", setup: "preset reqwest-default over h2c; server refuses the first stream; GET",
		preset: "reqwest-default", h2: []faultserver.H2Fault{faultserver.H2Refuse}, run: get("/"),
		want: expect{"2", "200", "success", "transparent_attempts=1"},
		note: goResendsToo + ".",
	},
	{
		id: "seed000/h2-default-post-bytes-refused-1", setup: "same; POST with a replayable body",
		preset: "reqwest-default", h2: []faultserver.H2Fault{faultserver.H2Refuse},
		run:  func(t *trial) { t.send("POST", "/", "bytes") },
		want: expect{"2", "200", "success", "transparent_attempts=1"},
		note: goResendsToo + "; a POST too, because its body can be replayed.",
	},
	{
		id: "seed000/h2-default-post-stream-refused-1", setup: "same; POST with a streaming body, refused once its first bytes arrive",
		// Refused at its HEADERS, the stream would be resent whenever
		// net/http saw the refusal before its writer read the body (it
		// resends a body it has not begun to read), which load decides;
		// reqwest never resends a body it cannot clone.
		preset: "reqwest-default", h2: []faultserver.H2Fault{faultserver.H2RefuseAfterBody},
		run:  func(t *trial) { t.stream("POST", "/", "stream") },
		want: expect{"1", "error", "body-not-replayable|non-retryable", "-"},
		note: "reqwest: 1 attempt, Err(REFUSED_STREAM) — the same; like reqwest, the lab's reqwest presets keep no streaming body, so net/http cannot resend one it has begun to send, and returns an untyped error, which no classifier can call a protocol NACK.",
	},
	{
		id:     "seed000/h2-never-get-refused-1",
		setup:  "preset reqwest-never over h2c; refuses the first stream; GET. reqwest: 1 stream, error. net/http resends REFUSED_STREAM by itself, so the stack sees success; the row must print both and say why",
		preset: "reqwest-never", h2: []faultserver.H2Fault{faultserver.H2Refuse}, run: get("/"),
		want: expect{"2", "200", "success", "transparent_attempts=1"},
		note: goResends + ".",
	},
}
