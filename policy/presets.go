package policy

import (
	"net/http"
	"time"
)

// Default returns retrystack's own safe policy: 3 attempts; only idempotent
// or keyed requests are retried, and others only when the attempt was never
// sent; statuses 408, 425, 429, 500, 502, 503, 504 and transient transport
// errors; full-jitter backoff from 100 ms capped at 8 s; Retry-After honoured
// (never shortened, at most a minute); a TPS budget of 20 % extra load (ttl
// 10 s, reserve 10 retries a second), new with each call.
func Default() Policy {
	return Policy{
		Name:        "default",
		MaxAttempts: 3,
		Classify: Rules{
			Statuses:           RetryableStatuses(),
			Errors:             ErrorKind.Transient,
			Safe:               Idempotent,
			ResendUnsentUnsafe: true,
		}.Classify,
		Backoff:    Backoff{Base: 100 * time.Millisecond, Cap: 8 * time.Second},
		RetryAfter: RetryAfter{Max: time.Minute},
		Budget:     MustTPSBudget(10*time.Second, 10, 0.2),
	}
}

// Python returns a patient policy for idempotent calls, as a careful
// hand-written client on Python's standard library has it (docs/presets.md): 4
// attempts within a 20 s total budget, 5 s per attempt; only GET, HEAD, PUT,
// DELETE and OPTIONS (or a request with an Idempotency-Key) are retried, on
// 408, 425, 429, 500, 502, 503, 504 and transient transport errors;
// full-jitter backoff from 0.5 s capped at 8 s; a Retry-After in seconds,
// fractions included, replaces the backoff (a date is ignored).
func Python() Policy {
	return Policy{
		Name:           "python",
		MaxAttempts:    4,
		AttemptTimeout: 5 * time.Second,
		Timeout:        20 * time.Second,
		Classify: Rules{
			Statuses: RetryableStatuses(),
			Errors:   ErrorKind.Transient,
			Safe:     pythonSafe,
		}.Classify,
		Backoff:    Backoff{Base: 500 * time.Millisecond, Cap: 8 * time.Second},
		RetryAfter: RetryAfter{Use: HintOverride, Fractions: true, Dates: DatesNone},
	}
}

func pythonSafe(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, "":
		return true
	}
	return hasIdempotencyKey(req.Header)
}

// Node returns a strict GET-only policy, as a careful Node.js client has it
// (docs/presets.md): 3 attempts within 4 s,
// 1 s per attempt (the body read included); only GET on 429 and 503;
// full-jitter backoff floor(r·min(200 ms, 50 ms·2^(n-1))); Retry-After in
// whole seconds or IMF-fixdate, waiting the larger of hint and backoff, and
// stopping with unsupported-retry-after on anything else.
func Node() Policy {
	return Policy{
		Name:           "node",
		MaxAttempts:    3,
		AttemptTimeout: time.Second,
		Timeout:        4 * time.Second,
		Classify: Rules{
			Statuses: NewStatusSet(http.StatusTooManyRequests, http.StatusServiceUnavailable),
			Safe:     func(req *http.Request) bool { return req.Method == http.MethodGet || req.Method == "" },
		}.Classify,
		Backoff:    Backoff{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
		RetryAfter: RetryAfter{Dates: DatesIMFOnly, StopOnUnsupported: true},
	}
}

// ReqwestDefault returns reqwest 0.13.5's client default: only the HTTP/2
// protocol NACKs (GOAWAY(NO_ERROR), REFUSED_STREAM) are retried, whatever
// the method, at most twice, at once, with no budget. In Go, net/http
// resends these itself below every layer, so this policy rarely sees one.
func ReqwestDefault() Policy {
	return reqwest("reqwest-default", Rules{Errors: ErrorKind.ProtocolNack, Safe: AnyRequest}.Classify, nil, Scope{})
}

// ReqwestForHost returns reqwest 0.13.5's retry::for_host(host): it
// retries nothing until a classifier is set (assign Classify), shares a 20 %
// budget (ttl 10 s, 10 retries a second in reserve), sends every retry at
// once, and checks the host only from the second retry on, so an
// out-of-scope request is sent twice.
func ReqwestForHost(host string) Policy {
	return reqwest("reqwest-for-host", Rules{Safe: AnyRequest}.Classify, MustTPSBudget(10*time.Second, 10, 0.2),
		Scope{Hosts: []string{host}, FromSecondRetry: true})
}

// ReqwestNever returns reqwest 0.13.5's retry::never(): nothing is retried.
func ReqwestNever() Policy {
	return reqwest("reqwest-never", Rules{Safe: AnyRequest}.Classify, nil, Scope{})
}

func reqwest(name string, classify Classifier, budget Budget, scope Scope) Policy {
	return Policy{
		Name:        name,
		MaxAttempts: 3, // 2 retries on top of the original
		Classify:    classify,
		Budget:      budget,
		Scope:       scope,
		RetryAfter:  RetryAfter{Use: HintIgnore},
		// The zero Backoff resends at once, as reqwest does.
	}
}

// RetryOn is Codex's switchboard of what a request retries: 429, 5xx and
// transport errors, each on or off. Classify turns it into a classifier;
// it ignores the method, as Codex retries its POSTs.
type RetryOn struct {
	TooManyRequests bool // 429
	ServerErrors    bool // 500-599
	Transport       bool // transient transport errors
}

// Classify decides on an attempt by the switches.
func (r RetryOn) Classify(a Attempt) Decision {
	if a.Err != nil {
		kind := KindOf(a.Err)
		switch {
		case kind == ErrorCanceled:
			return Stop(StopCancelled)
		case r.Transport && kind.Transient():
			return Retry(kind.cause())
		}
		return Stop(StopNonRetryable)
	}
	if a.Response == nil {
		return Stop(StopSuccess)
	}
	code := a.Response.StatusCode
	switch {
	case code == 429 && r.TooManyRequests, code >= 500 && code <= 599 && r.ServerErrors:
		return Retry("status")
	case code < 400:
		return Stop(StopSuccess)
	}
	return Stop(StopNonRetryable)
}

// Codex returns the request-level policy of OpenAI's Codex model client
// (docs/presets.md): 4 request retries, RetryOn{429: false, 5xx: true, transport: true},
// backoff 200 ms·2^(n-1) with ×[0.9, 1.1) jitter, and a server-provided
// delay that replaces the backoff.
func Codex() Policy {
	return Policy{
		Name:        "codex",
		MaxAttempts: 5,
		Classify:    RetryOn{ServerErrors: true, Transport: true}.Classify,
		Backoff:     Backoff{Base: 200 * time.Millisecond, Jitter: JitterTenPercent},
		RetryAfter:  RetryAfter{Use: HintOverride},
	}
}

// CodexStream returns Codex's stream-level policy, the outer of its two
// nested budgets: 5 stream retries, each of which may hold several HTTP
// attempts, every stream error retried, backoff 200 ms·2^(n-1) with
// ×[0.9, 1.1) jitter. Run a stream under it with engine.Do.
func CodexStream() Policy {
	return Policy{
		Name:        "codex-stream",
		MaxAttempts: 6,
		Classify: func(a Attempt) Decision {
			if a.Err == nil {
				return Stop(StopSuccess)
			}
			if KindOf(a.Err) == ErrorCanceled {
				return Stop(StopCancelled)
			}
			return Retry("stream")
		},
		Backoff: Backoff{Base: 200 * time.Millisecond, Jitter: JitterTenPercent},
	}
}
