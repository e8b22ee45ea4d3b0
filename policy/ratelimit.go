package policy

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rateLimitWait reads a response's rate-limit fields and returns how long
// until the limit resets, when they say none of it remains. It knows:
//
//   - the IETF fields (draft-ietf-httpapi-ratelimit-headers): a RateLimit
//     item with r=0 waits its t seconds; the earlier drafts' split fields,
//     RateLimit-Remaining: 0 with RateLimit-Reset in seconds;
//   - the common pair X-RateLimit-Remaining: 0 with X-RateLimit-Reset,
//     either seconds from now or, for a value past 1e9, a Unix time
//     (GitHub's form).
//
// Values that do not parse, negative values and remaining counts above 0
// give nothing; a wait is capped at maxRetryAfter, and a reset in the past
// is 0.
func rateLimitWait(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h["Ratelimit"]; len(v) > 0 {
		if d, ok := spentRateLimitItem(strings.Join(v, ",")); ok {
			return d, true
		}
	}
	for _, pair := range [...][2]string{{"Ratelimit-Remaining", "Ratelimit-Reset"}, {"X-Ratelimit-Remaining", "X-Ratelimit-Reset"}} {
		if !spent(h.Get(pair[0])) {
			continue
		}
		if d, ok := resetIn(h.Get(pair[1]), now); ok {
			return d, true
		}
	}
	return 0, false
}

// rateLimitSpent reports whether h says a rate limit has nothing left and
// when it resets: without a reset there is nothing to wait for, and the
// status stands.
func rateLimitSpent(h http.Header) bool {
	_, ok := rateLimitWait(h, time.Time{})
	return ok
}

func spent(remaining string) bool {
	remaining = strings.TrimSpace(remaining)
	if remaining == "" {
		return false // absent, as on most answers: no error value to make
	}
	n, err := strconv.ParseInt(remaining, 10, 64)
	return err == nil && n == 0
}

// resetIn reads a reset value: delta-seconds, or a Unix time past 1e9.
func resetIn(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false // absent: no error value to make
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n > 1e9 {
		return min(max(time.Unix(n, 0).Sub(now), 0), maxRetryAfter), true
	}
	return seconds(n), true
}

func seconds(n int64) time.Duration {
	return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
}

// spentRateLimitItem finds, in a RateLimit field value (a list of items
// such as `"default";r=0;t=1`), the longest t of the items whose r is 0.
func spentRateLimitItem(v string) (time.Duration, bool) {
	var wait time.Duration
	found := false
	for item := range strings.SplitSeq(v, ",") {
		r, t := "", ""
		for i, param := range strings.Split(item, ";") {
			if i == 0 {
				continue // the item's name
			}
			k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
			switch strings.TrimSpace(k) {
			case "r":
				r = val
			case "t":
				t = val
			}
		}
		if !spent(r) {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
		if err != nil || n < 0 {
			continue
		}
		d := seconds(n)
		if !found || d > wait {
			wait, found = d, true
		}
	}
	return wait, found
}
