package policy

import (
	"net/http"
	"time"
)

// Default returns retrystack's own safe policy: 3 attempts; only idempotent
// or keyed requests are retried, and others only when the attempt was never
// sent; statuses 408, 425, 429, 500, 502, 503, 504 and transient transport
// errors, and a 403 or 429 that says its rate limit is spent; full-jitter
// backoff from 100 ms capped at 8 s; Retry-After and a spent rate limit's
// reset honoured (never shortened, at most a minute), and holding back the
// other requests to that host until then; a budget of retries earned only
// by the client's own successes ([NewEarnedBudget](0.2, 2): one retry per
// five successes, the retries of an operation that succeeds paid back, at
// most two at once plus a fifth of the last second's successes, a
// timeout's retry only from the last second's successes), new with each
// call, so that a fleet of clients retries no more than its successes pay
// for (docs/fleet.md). A client that is alone and whose attempts may time
// out retries them under [Alone].
func Default() Policy {
	return Policy{
		Name:        "default",
		MaxAttempts: 3,
		Classify: Rules{
			Statuses:           RetryableStatuses(),
			Errors:             ErrorKind.Transient,
			Safe:               Idempotent,
			ResendUnsentUnsafe: true,
			RateLimits:         true,
		}.Classify,
		Backoff:    Backoff{Base: 100 * time.Millisecond, Cap: 8 * time.Second},
		RetryAfter: RetryAfter{Max: time.Minute, Pace: true},
		Budget:     newEarnedBudget(0.2, 2),
	}
}

// Alone returns [Default] for a client that is alone: a command-line
// tool, an SDK wrapper, a client of a public API (S3, Stripe, an LLM
// provider), a service that is a small share of its upstream's load. Its
// budget pays the retry of an attempt that timed out
// (Policy.AttemptTimeout) from its stock like any other retry, where
// Default's retries a timeout only after 20 successes in the last second:
// a lone client of a few requests a second retries its stalls, as
// go-retryablehttp does. Everything else is Default's: a retry that
// succeeds is paid back, one that fails is not, so a client whose every
// attempt times out stops retrying after its stock of two.
//
// The cost is the fleet's: in a fleet of many small clients each client's
// stock is spent on timeouts at the start of a brown-out, and together
// they can keep a slow service down (docs/fleet.md has the figures). A
// fleet should use Default, or share one budget.
func Alone() Policy {
	p := Default()
	p.Name = "alone"
	p.Budget = aloneBudget{newEarnedBudget(0.2, 2)}
	return p
}

// Never returns a policy that retries nothing. Assign Classify to retry
// what it picks (every request counts as safe to resend): up to 3
// attempts, sent at once, Retry-After ignored, no budget.
func Never() Policy {
	return Policy{
		Name:        "never",
		MaxAttempts: 3,
		Classify:    Rules{Safe: func(*http.Request) bool { return true }}.Classify,
		RetryAfter:  RetryAfter{Ignore: true},
		// The zero Backoff resends at once.
	}
}
