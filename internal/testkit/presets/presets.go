// Package presets holds the policies of the client libraries and
// hand-written clients that the lab (cmd/retrylab) reproduces, under the
// names of those clients. They are built from policy's public API only, so
// each one is also an example of configuring a policy; docs/presets.md
// explains where each comes from. Users start from policy.Default,
// policy.Never or policy.ForHost instead.
package presets

import (
	"net/http"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/policy"
)

// Python is a patient policy for idempotent calls, as a careful
// hand-written client on Python's standard library has it: 4 attempts
// within a 20 s total budget, 5 s per attempt; only GET, HEAD, PUT, DELETE
// and OPTIONS (or a request with an Idempotency-Key) are retried, on 408,
// 425, 429, 500, 502, 503, 504 and transient transport errors; full-jitter
// backoff from 0.5 s capped at 8 s; a Retry-After in seconds, fractions
// included, replaces the backoff (a date is ignored).
func Python() policy.Policy {
	return policy.Policy{
		Name:           "python",
		MaxAttempts:    4,
		AttemptTimeout: 5 * time.Second,
		Timeout:        20 * time.Second,
		Classify: policy.Rules{
			Statuses: policy.RetryableStatuses(),
			Errors:   policy.ErrorKind.Transient,
			Safe:     pythonSafe,
		}.Classify,
		Backoff:    policy.Backoff{Base: 500 * time.Millisecond, Cap: 8 * time.Second},
		RetryAfter: policy.RetryAfter{Override: true, Fractions: true, SecondsOnly: true},
	}
}

func pythonSafe(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, "":
		return true
	}
	return len(req.Header[protocol.IdempotencyKey]) > 0 || len(req.Header[protocol.XIdempotencyKey]) > 0
}

// Node is a strict GET-only policy, as a careful Node.js client has it: 3
// attempts within 4 s, 1 s per attempt (the body read included); only GET
// on 429 and 503; full-jitter backoff floor(r·min(200 ms, 50 ms·2^(n-1)));
// Retry-After in whole seconds or IMF-fixdate, waiting the larger of hint
// and backoff, and stopping with unsupported-retry-after on anything else.
func Node() policy.Policy {
	return policy.Policy{
		Name:           "node",
		MaxAttempts:    3,
		AttemptTimeout: time.Second,
		Timeout:        4 * time.Second,
		Classify: policy.Rules{
			Statuses: policy.NewStatusSet(http.StatusTooManyRequests, http.StatusServiceUnavailable),
			Safe:     func(req *http.Request) bool { return req.Method == http.MethodGet || req.Method == "" },
		}.Classify,
		Backoff:    policy.Backoff{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
		RetryAfter: policy.RetryAfter{IMFDatesOnly: true, StopOnUnsupported: true},
	}
}

// ReqwestDefault is reqwest 0.13.5's client default: only the HTTP/2
// protocol NACKs (GOAWAY(NO_ERROR), REFUSED_STREAM) are retried, whatever
// the method, at most twice, at once, with no budget. In Go, net/http
// resends these itself below every layer, so this policy rarely sees one.
func ReqwestDefault() policy.Policy {
	p := policy.Never()
	p.Name = "reqwest-default"
	p.Classify = policy.Rules{Errors: policy.ErrorKind.ProtocolNack, Safe: func(*http.Request) bool { return true }}.Classify
	return p
}

// ReqwestForHost is reqwest 0.13.5's retry::for_host(host): it retries
// nothing until a classifier is set (assign Classify; every request counts
// as safe to resend), allows 3 attempts sent at once, shares a 20 % budget
// (ttl 10 s, 10 retries a second in reserve), ignores Retry-After, and
// checks the host only from the second retry on, so a request to another
// host is sent twice.
func ReqwestForHost(host string) policy.Policy {
	p := policy.Never()
	p.Name = "reqwest-for-host"
	p.Budget = Budget(10*time.Second, 10, 0.2)
	p.Scope = policy.Scope{Hosts: []string{host}, FromSecondRetry: true}
	return p
}

// ReqwestNever is reqwest 0.13.5's retry::never(): policy.Never.
func ReqwestNever() policy.Policy {
	p := policy.Never()
	p.Name = "reqwest-never"
	return p
}

// Codex is the request-level policy of OpenAI's Codex model client: 4
// request retries on 5xx and transport errors (not 429), whatever the
// method; backoff 200 ms·2^(n-1) with ×[0.9, 1.1) jitter; a server-provided
// delay replaces the backoff.
func Codex() policy.Policy {
	var fivexx []int
	for code := 500; code <= 599; code++ {
		fivexx = append(fivexx, code)
	}
	return policy.Policy{
		Name:        "codex",
		MaxAttempts: 5,
		Classify: policy.Rules{
			Statuses: policy.NewStatusSet(fivexx...),
			Errors:   policy.ErrorKind.Transient,
			Safe:     func(*http.Request) bool { return true },
		}.Classify,
		Backoff:    policy.Backoff{Base: 200 * time.Millisecond, Jitter: policy.JitterTenPercent},
		RetryAfter: policy.RetryAfter{Override: true},
	}
}

// CodexStream is Codex's stream-level policy, the outer of its two nested
// budgets: 5 stream retries, each of which may hold several HTTP attempts,
// every stream error retried, backoff 200 ms·2^(n-1) with ×[0.9, 1.1)
// jitter. Run a stream under it with engine.Do.
func CodexStream() policy.Policy {
	return policy.Policy{
		Name:        "codex-stream",
		MaxAttempts: 6,
		Classify: func(a policy.Attempt) policy.Decision {
			if a.Err == nil {
				return policy.Stop(policy.StopSuccess)
			}
			if policy.KindOf(a.Err) == policy.ErrorCanceled {
				return policy.Stop(policy.StopCancelled)
			}
			return policy.Retry("stream")
		},
		Backoff: policy.Backoff{Base: 200 * time.Millisecond, Jitter: policy.JitterTenPercent},
	}
}

// Budget is policy.NewTPSBudget for values known to be valid (the lab's,
// the tests'); it panics on a *policy.ConfigError.
func Budget(ttl time.Duration, minPerSec int, ratio float64) policy.Budget {
	b, err := policy.NewTPSBudget(ttl, minPerSec, ratio)
	if err != nil {
		panic(err)
	}
	return b
}
