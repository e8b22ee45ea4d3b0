package policy_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrystack/retrystack/policy"
)

// What a response's header asks the client to wait: Retry-After, a spent
// rate limit's reset, the longer of the two; bad values ask nothing.
func TestHint(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	epoch := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	tests := []struct {
		name      string
		h         http.Header
		wait      time.Duration
		found, ok bool
	}{
		{"nothing", http.Header{}, 0, false, true},
		{"retry-after", http.Header{"Retry-After": {"3"}}, 3 * time.Second, true, true},
		{"unsupported retry-after", http.Header{"Retry-After": {"soon"}}, 0, true, false},
		{"github primary limit", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(time.Minute)}}, time.Minute, true, true},
		{"reset as seconds", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}}, 30 * time.Second, true, true},
		{"reset in the past", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(-time.Minute)}}, 0, true, true},
		{"limit left", http.Header{"X-Ratelimit-Remaining": {"4"}, "X-Ratelimit-Reset": {"30"}}, 0, false, true},
		{"negative reset", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"-3"}}, 0, false, true},
		{"garbage remaining", http.Header{"X-Ratelimit-Remaining": {"none"}, "X-Ratelimit-Reset": {"30"}}, 0, false, true},
		{"huge reset is capped", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"999999999"}}, 999999999 * time.Second, true, true},
		{"ietf item spent", http.Header{"Ratelimit": {`"default";r=0;t=1`}}, time.Second, true, true},
		{"ietf item left", http.Header{"Ratelimit": {`"default";r=5;t=1`}}, 0, false, true},
		{"ietf longest spent item", http.Header{"Ratelimit": {`"burst";r=0;t=2, "day";r=0;t=40, "hour";r=3;t=900`}}, 40 * time.Second, true, true},
		{"ietf garbage", http.Header{"Ratelimit": {`;;;r=;t=x,,`}}, 0, false, true},
		{"older ietf draft", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"5"}}, 5 * time.Second, true, true},
		{"the longer of hint and reset", http.Header{"Retry-After": {"2"}, "Ratelimit": {`"d";r=0;t=9`}}, 9 * time.Second, true, true},
		{"an unsupported hint with a reset", http.Header{"Retry-After": {"soon"}, "Ratelimit": {`"d";r=0;t=9`}}, 9 * time.Second, true, true},
	}
	for _, tt := range tests {
		wait, found, ok := policy.RetryAfter{}.Hint(tt.h, now)
		if wait != tt.wait || found != tt.found || ok != tt.ok {
			t.Errorf("%s: Hint = %v, %v, %v; want %v, %v, %v", tt.name, wait, found, ok, tt.wait, tt.found, tt.ok)
		}
	}
	if _, found, _ := (policy.RetryAfter{Ignore: true}).Hint(http.Header{"Retry-After": {"3"}}, now); found {
		t.Error("Ignore still found a hint")
	}
}

// The default policy retries a rate limit that says it is spent, 403
// included (GitHub's primary limit), and nothing else at 403.
func TestRateLimitsAreRetried(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://api.test/", nil)
	p := policy.Default()
	spent := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"60"}}
	for _, tt := range []struct {
		name   string
		status int
		h      http.Header
		retry  bool
	}{
		{"403 spent", 403, spent, true},
		{"429 spent", 429, spent, true},
		{"403 forbidden", 403, http.Header{}, false},
		{"403 with limit left", 403, http.Header{"X-Ratelimit-Remaining": {"9"}}, false},
		{"403 spent, no reset to wait for", 403, http.Header{"X-Ratelimit-Remaining": {"0"}}, false},
		{"403 spent, unreadable reset", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"0.5"}}, false},
		{"500 spent is a 500", 500, spent, true},
	} {
		d := p.Classify(policy.Attempt{Request: req, Response: &http.Response{StatusCode: tt.status, Header: tt.h}, Number: 1, Processed: policy.Responded})
		if d.Retry != tt.retry {
			t.Errorf("%s: %+v, want retry %v", tt.name, d, tt.retry)
		}
	}
}
