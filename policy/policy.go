package policy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// Policy is everything that decides the retries of one logical operation.
// It is a plain value: copy a preset and change fields. Validate it, or let
// the engine do so when it is built; a Policy in use must not be modified.
// A copy shares its Budget (an interface, usually a pointer): two clients
// made from one copied Policy spend one budget. Call the preset again, or
// set a Budget of its own, for a client that must not.
type Policy struct {
	// Name labels the policy in reports and the lab, e.g. "default".
	Name string
	// MaxAttempts counts every attempt, the first included: 1 never
	// retries. It must be between 1 and 10 000; the zero value is invalid
	// (start from [Default]).
	MaxAttempts int
	// AttemptTimeout bounds each attempt, from sending to the end of its
	// body; an attempt gets min(AttemptTimeout, time left). 0: no limit.
	// An attempt that timed out may still be running on the server, so
	// [Default]'s budget retries it only for a client that had 20
	// successes in the last second (a busy client; one of a fleet of small
	// clients never does), or for a keyed request; otherwise the operation
	// stops timeout-not-retried. [Alone] retries it from the client's
	// stock of retries, as any other failure.
	AttemptTimeout time.Duration
	// Timeout bounds the whole operation: attempts, waits, every redirect
	// hop (in a Stack, the deadline is fixed when the first hop starts)
	// and the read of the final body. The caller's context deadline
	// applies too; the earlier one wins. 0: only the caller's context.
	Timeout time.Duration
	// Classify decides whether an attempt is retried (Rules.Classify
	// builds the usual one). Required. It must be safe for concurrent use
	// and must not read the response body.
	Classify func(Attempt) Decision
	// Backoff shapes the waits between attempts.
	Backoff Backoff
	// RetryAfter says how server hints are used.
	RetryAfter RetryAfter
	// Scope limits the requests that may be retried.
	Scope Scope
	// IdempotencyKeys gives a request whose method is not idempotent and
	// that carries no Idempotency-Key one of its own: a random UUID, the
	// same on every attempt and redirect hop of the operation. The request
	// then counts as keyed (Idempotent) and is retried like an idempotent
	// one; a server that speaks the IETF idempotency protocol (package
	// idempotency) runs it once. A key the caller set is never replaced.
	IdempotencyKeys bool
	// Budget limits retries across every request sharing it; nil: no limit.
	// Share one between the policies of one client (NewTPSBudget's, or your
	// own).
	Budget Budget
	// Rand is the jitter's randomness, values in [0, 1), safe for
	// concurrent use. nil: math/rand/v2.
	Rand func() float64
}

// The bounds of a policy's values.
const (
	// maxAttemptsLimit is the largest MaxAttempts a policy accepts.
	maxAttemptsLimit = 10_000
	// maxRetryAfter is the longest hint a RetryAfter parses: larger values
	// (up to any number of digits) are capped here instead of overflowing.
	maxRetryAfter = 100 * 365 * 24 * time.Hour
	// minBudgetRatio is the smallest ratio above 0 that NewTPSBudget
	// accepts: one retry per million successes. Below it the amount
	// withdrawn per retry would overflow, and a tiny ratio must never mean
	// "unlimited".
	minBudgetRatio = 1e-6
)

// RetryAfter configures the use of Retry-After hints. A hint is never
// shortened: if it ends after the deadline, or is longer than Max, the
// operation stops with wait-exceeds-budget instead of waiting less.
type RetryAfter struct {
	// Ignore never reads Retry-After.
	Ignore bool
	// Override waits exactly the hint instead of the backoff. By default
	// the wait is max(hint, backoff): never less than the server asked,
	// and never less than the policy would.
	Override bool
	// Fractions accepts decimal seconds such as "0.2", as Python's float()
	// does; RFC 9110 allows only whole seconds.
	Fractions bool
	// SecondsOnly accepts delta-seconds only: an HTTP-date is unsupported.
	SecondsOnly bool
	// IMFDatesOnly accepts, of the HTTP-date forms, only IMF-fixdate, as
	// many clients do. By default the obsolete RFC 850 and asctime forms
	// are accepted too, as RFC 9110 asks of recipients.
	IMFDatesOnly bool
	// StopOnUnsupported ends the operation with unsupported-retry-after
	// when a hint cannot be parsed; otherwise the hint is ignored, the
	// backoff used, and the pitfall retry-after-ignored reported.
	StopOnUnsupported bool
	// Max is the longest hint that is honoured. 0: only the deadline limits it.
	Max time.Duration
	// Pace makes a hint hold back the retry layer's other requests to the
	// host too: after a 429 or 503 whose Retry-After or spent rate limit
	// (RateLimit r=0, X-RateLimit-Remaining: 0) asks for a wait, every
	// attempt to that host, of any operation, waits until then within
	// its deadline, or stops at once with wait-exceeds-budget, nothing
	// sent, instead of meeting the same 429. A later answer that asks for
	// longer holds the attempts already waiting too: each checks the
	// host's hold again when its wait ends. A host is held back at most
	// Max (an hour without one) per answer, and forgotten once its time
	// has passed. Default sets it.
	Pace bool
	// Shared, with Pace, shares the holds with other clients (a fleet's
	// processes, through stores/redis's Fleet): a hold this client's
	// answer asks for is told to Shared, and a request waits for the
	// holds Shared knows of too, as for its own. nil: holds stay in this
	// client.
	Shared Pacer
}

// Pacer shares pacing holds (RetryAfter.Pace) beyond one client. The retry
// layer calls HeldUntil on every attempt when set, so its methods must be
// safe for concurrent use, must not block (no network call: exchange holds
// in the background) and should be cheap.
type Pacer interface {
	// Hold records that the host of req (host, as net/http dials it:
	// "api.example.com", or "127.0.0.1:8080") asked for no requests until
	// until.
	Hold(req *http.Request, host string, until time.Time)
	// HeldUntil is until when a request such as req, to host, must wait
	// for another client's hold: the zero time when none holds it.
	HeldUntil(req *http.Request, host string) time.Time
}

// Hint is the wait a response's header asks for: its Retry-After, and,
// when its rate-limit fields say nothing remains (RateLimit with r=0,
// RateLimit-Remaining or X-RateLimit-Remaining: 0), the time until the
// limit resets; the longer of the two. Of several Retry-After fields (an
// upstream's and a proxy's) the longest these rules parse counts: the
// safer, so that an upstream's 0 does not undo a proxy's floor. found is
// false when the header
// asks for nothing; ok is false when it has a Retry-After these rules do
// not support (and no rate-limit reset). With Ignore it finds nothing.
func (r RetryAfter) Hint(h http.Header, now time.Time) (wait time.Duration, found, ok bool) {
	if r.Ignore || h == nil {
		return 0, false, true
	}
	limit, limited := rateLimitWait(h, now)
	if v := h["Retry-After"]; len(v) > 0 {
		// Several (an upstream's and a proxy's): the longest this policy
		// parses, the safer; an upstream's 0 does not undo a proxy's floor.
		hw, hok := time.Duration(0), false
		for _, s := range v {
			if w, ok := r.Parse(s, now); ok {
				hw, hok = max(hw, w), true
			}
		}
		switch {
		case hok:
			return max(hw, limit), true, true
		case !limited:
			return 0, true, false
		}
	}
	return limit, limited, true
}

// Parse parses a Retry-After value under these rules; ok is false for a
// value they do not support.
func (r RetryAfter) Parse(value string, now time.Time) (wait time.Duration, ok bool) {
	dates := datesAll
	switch {
	case r.SecondsOnly:
		dates = datesNone
	case r.IMFDatesOnly:
		dates = datesIMFOnly
	}
	return parseRetryAfter(value, now, r.Fractions, dates)
}

// dateForms are the HTTP-date forms a Retry-After may use.
type dateForms uint8

const (
	datesAll dateForms = iota
	datesIMFOnly
	datesNone
)

// ConfigError reports an invalid configuration field: a policy's, a
// layer's, or a setting an entry point of package retrystack cannot honour
// (a Config field, or a field of the *http.Client it returned). Field is
// spelled one way everywhere: the field's path from the value the caller
// passed, after that value's package and type, e.g.
// "retrystack.Config.Policy.MaxAttempts", "engine.Config.Routes[1].PathPrefix",
// "hedge.Config.Delay", "policy.Policy.Backoff.Cap" (from Validate); a
// constructor's argument is "policy.NewEarnedBudget(ratio)".
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == nil {
		return "retrystack: " + e.Field + ": " + e.Reason // a setting, not a value
	}
	return fmt.Sprintf("retrystack: %s = %v: %s", e.Field, e.Value, e.Reason)
}

// Validate reports the first invalid field as a *ConfigError.
func (p *Policy) Validate() error {
	bad := func(field string, value any, reason string) error {
		return &ConfigError{Field: "policy.Policy." + field, Value: value, Reason: reason}
	}
	switch {
	case p.MaxAttempts == 0 && p.Classify == nil:
		// A Policy built from its zero value, e.g. Policy{Timeout: d}.
		return bad("MaxAttempts", 0, zeroPolicy)
	case p.MaxAttempts < 1 || p.MaxAttempts > maxAttemptsLimit:
		return bad("MaxAttempts", p.MaxAttempts, fmt.Sprintf("must be between 1 and %d (1 never retries; policy.Default() has 3)", maxAttemptsLimit))
	case p.AttemptTimeout < 0:
		return bad("AttemptTimeout", p.AttemptTimeout, "must not be negative (0: no limit per attempt)")
	case p.Timeout < 0:
		return bad("Timeout", p.Timeout, "must not be negative (0: only the caller's context bounds the operation)")
	case p.Classify == nil:
		return bad("Classify", nil, "required: assign a Rules value's Classify method, or start from policy.Default() or policy.Never()")
	case p.Backoff.Base < 0:
		return bad("Backoff.Base", p.Backoff.Base, "must not be negative (0: no wait between attempts)")
	case p.Backoff.Cap < 0:
		return bad("Backoff.Cap", p.Backoff.Cap, "must not be negative (0: no cap)")
	case p.Backoff.Make != nil && (p.Backoff.Base != 0 || p.Backoff.Cap != 0 || p.Backoff.Jitter != JitterFull):
		return bad("Backoff.Make", "set with Base, Cap or Jitter", "set either Make or Base, Cap and Jitter: clear the others")
	case p.Backoff.Jitter > JitterTenPercent:
		return bad("Backoff.Jitter", p.Backoff.Jitter, "unknown jitter: use JitterFull, JitterNone or JitterTenPercent")
	case p.RetryAfter.Max < 0:
		return bad("RetryAfter.Max", p.RetryAfter.Max, "must not be negative (0: only the deadline limits a hint)")
	case p.RetryAfter.Shared != nil && !p.RetryAfter.Pace:
		return bad("RetryAfter.Shared", "set", "is used only with RetryAfter.Pace: set Pace too, or no Shared")
	}
	return nil
}

// zeroPolicy is the fix for a Policy built from its zero value.
const zeroPolicy = "a Policy built from its zero value retries nothing and is invalid: " +
	"start from policy.Default() (or policy.Never()) and change fields, e.g. p := policy.Default(); p.Timeout = 10 * time.Second"

func orDefault(rnd func() float64) func() float64 {
	if rnd == nil {
		return rand.Float64
	}
	return rnd
}
