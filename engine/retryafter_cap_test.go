package engine

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
)

// With neither RetryAfter.Max nor a deadline (Codex's preset), an absurd
// hint is waited at most 100 years: capped, never overflowed
// into a short or negative wait that would hammer the server.
func TestAbsurdRetryAfterIsCapped(t *testing.T) {
	for _, tt := range []struct{ name, hint string }{
		{"seconds", "1000000000000"},
		{"more digits than int64", "99999999999999999999999999999"},
		{"the last HTTP-date", "Fri, 31 Dec 9999 23:59:59 GMT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, presets.Codex())
			resp, rep, err := f.send(context.Background(), "GET", "/s/503?retry-after="+url.QueryEscape(tt.hint), "", false)
			if err != nil {
				t.Fatal(err)
			}
			capped := []time.Duration{maxRetryAfter, maxRetryAfter, maxRetryAfter, maxRetryAfter}
			want := outcome{Status: 503, Requests: 5, Stop: policy.StopAttemptsExhausted, Waits: capped,
				Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}
			if diff := cmp.Diff(want, f.outcome(resp, rep)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(capped, f.clock.slept); diff != "" {
				t.Errorf("slept (-want +got):\n%s", diff)
			}
		})
	}
}

// maxRetryAfter is the longest hint a RetryAfter parses: 100 years.
const maxRetryAfter = 100 * 365 * 24 * time.Hour
