package policy_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystack/retrystack/policy"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT"), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.ANSIC), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999999999999999999", maxRetryAfter, true},
		{"3153600000", maxRetryAfter, true},                    // exactly 100 years
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxRetryAfter, true}, // a far-future date is capped too
		{"Friday, 31-Dec-99 23:59:59 GMT", 0, true},            // RFC 850's two-digit year: 1999, in the past
		{"Fri Dec 31 23:59:59 9999", maxRetryAfter, true},      // asctime
		{"1.5", 0, false},
		{"0.2", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"1 2", 0, false},
		{"Mon, 30 Nov 2026 12:00:00 PST", 0, false},
	}
	for _, tt := range tests {
		got, ok := policy.RetryAfter{}.Parse(tt.value, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRetryAfterRules(t *testing.T) {
	rfc850 := now.Add(time.Minute).Format("Monday, 02-Jan-06 15:04:05 GMT")
	imf := now.Add(time.Minute).Format(http.TimeFormat)
	tests := []struct {
		name  string
		rules policy.RetryAfter
		value string
		want  time.Duration
		ok    bool
	}{
		{"fractions", policy.RetryAfter{Fractions: true}, "0.2", 200 * time.Millisecond, true},
		{"fraction digits past ns", policy.RetryAfter{Fractions: true}, "1.0000000019", time.Second + 1, true},
		{"fraction without digits", policy.RetryAfter{Fractions: true}, "1.", 0, false},
		{"negative fraction", policy.RetryAfter{Fractions: true}, "-0.5", 0, false},
		{"imf only takes imf", policy.RetryAfter{IMFDatesOnly: true}, imf, time.Minute, true},
		{"imf only refuses rfc850", policy.RetryAfter{IMFDatesOnly: true}, rfc850, 0, false},
		{"no dates", policy.RetryAfter{SecondsOnly: true}, imf, 0, false},
		{"no dates, seconds", policy.RetryAfter{SecondsOnly: true}, "3", 3 * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := tt.rules.Parse(tt.value, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Parse(%q) = %v, %v; want %v, %v", tt.name, tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"0", "1", "120", "1.5", "-1", "soon", "", "99999999999999999999",
		now.Format(http.TimeFormat), now.Format(time.ANSIC), "Sunday, 06-Nov-94 08:49:37 GMT", "0.2", " 5 "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		strict, ok := policy.RetryAfter{}.Parse(value, now)
		if strict < 0 || strict > maxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v: out of [0, MaxRetryAfter]", value, strict)
		}
		if !ok && strict != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok false", value, strict)
		}
		lenient, lok := policy.RetryAfter{Fractions: true}.Parse(value, now)
		if ok && (!lok || lenient != strict) {
			t.Fatalf("fractions changed a strict answer for %q: %v, %v vs %v, %v", value, lenient, lok, strict, ok)
		}
		if v := strings.TrimSpace(value); v != "" && strings.Trim(v, "0123456789") == "" {
			n, err := strconv.ParseInt(v, 10, 64)
			want := maxRetryAfter
			if err == nil && n < int64(maxRetryAfter/time.Second) {
				want = time.Duration(n) * time.Second
			}
			if !ok || strict != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", value, strict, ok, want)
			}
		}
	})
}

// maxRetryAfter is the longest hint a RetryAfter parses: 100 years.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// Two Retry-After fields (an upstream's and the proxy's in front of it):
// the longest counts, whichever comes first; one the rules cannot parse
// does not hide one they can.
func TestHintTakesTheLongestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		values []string
		want   time.Duration
	}{
		{[]string{"0", "2"}, 2 * time.Second},
		{[]string{"2", "0"}, 2 * time.Second},
		{[]string{"soon", "3"}, 3 * time.Second},
		{[]string{"1", now.Add(5 * time.Second).Format(http.TimeFormat)}, 5 * time.Second},
	} {
		h := http.Header{"Retry-After": tt.values}
		got, found, ok := policy.RetryAfter{}.Hint(h, now)
		if got != tt.want || !found || !ok {
			t.Errorf("Retry-After %q: %v, found %v, ok %v; want %v", tt.values, got, found, ok, tt.want)
		}
	}
}
