package policy_test

import (
	"net/http"
	"testing"

	"github.com/retrystack/retrystack/policy"
)

// The idempotency protocol's answers, whatever the Rules' parts: a 409
// problem detail to a keyed request is asked again; an application's own
// 409 stands; a replayed answer is final.
func TestRulesFollowTheIdempotencyProtocol(t *testing.T) {
	keyed, _ := http.NewRequest("POST", "http://example.test/orders", nil)
	keyed.Header.Set("Idempotency-Key", `"k"`)
	bare, _ := http.NewRequest("POST", "http://example.test/orders", nil)
	resp := func(status int, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	rules := policy.Rules{Statuses: policy.RetryableStatuses(), Safe: func(*http.Request) bool { return true }}
	for _, tt := range []struct {
		name string
		req  *http.Request
		resp *http.Response
		want policy.Decision
	}{
		{"in flight", keyed, resp(409, "Content-Type", "application/problem+json"), policy.Retry("key-in-flight")},
		{"in flight, parameters", keyed, resp(409, "Content-Type", "Application/Problem+JSON; charset=utf-8"), policy.Retry("key-in-flight")},
		{"the application's conflict", keyed, resp(409, "Content-Type", "text/plain"), policy.Stop(policy.StopNonRetryable)},
		{"a conflict without a body type", keyed, resp(409), policy.Stop(policy.StopNonRetryable)},
		{"no key", bare, resp(409, "Content-Type", "application/problem+json"), policy.Stop(policy.StopNonRetryable)},
		{"replayed 500", keyed, resp(500, "Idempotent-Replayed", "true"), policy.Stop(policy.StopNonRetryable)},
		{"replayed 201", keyed, resp(201, "Idempotent-Replayed", "true"), policy.Stop(policy.StopSuccess)},
		{"replayed without a body", keyed, resp(503, "Idempotent-Replayed", "body-not-kept"), policy.Stop(policy.StopNonRetryable)},
		{"a 500 not replayed", keyed, resp(500), policy.Retry("status")},
	} {
		got := rules.Classify(policy.Attempt{Request: tt.req, Response: tt.resp, Number: 1, Processed: policy.Responded})
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
