package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// Report describes one operation of a retry layer (behind a redirect
// layer, one hop). The engine fills it in as the
// operation runs; once the operation has returned (and the caller has read
// the final body, whose errors may still set Stop) it is no longer written.
type Report struct {
	attempt [1]AttemptRecord // room for the first attempt: no allocation when there is no retry

	Policy       string            // the policy's name
	Layer        string            // Config.Layer: "http" or "stream"
	Fallbacks    int               // fallbacks run (Op.Fallback)
	Attempts     []AttemptRecord   // one per attempt, in order (one refused by a breaker below included, not sent)
	PlannedWaits []time.Duration   // the wait planned before each retry
	Elapsed      time.Duration     // from the start of the operation to its end
	Stop         policy.StopReason // why the operation ended
	Pitfalls     []Pitfall         // the pitfalls that fired, in order
	Paced        []PacedWait       // the waits for a host that asked for no requests, in order
	// Previous is the report of the retry layer's previous run within the
	// same logical operation, nil for the first: behind a redirect layer
	// above the retry layer, the hop before this one (each hop is a run
	// of its own). Hops walks them.
	Previous *Report
	// Replayed: the final answer is one the server stored for an earlier
	// attempt of this keyed request and sent again (Idempotent-Replayed):
	// the write ran once, before.
	Replayed bool
}

// AttemptRecord is one attempt of an operation.
type AttemptRecord struct {
	Status    int   // the response status; 0 when Err is set
	Err       error // the attempt's error
	Processed policy.Processed
	// Transparent counts the extra physical sends the transport made on
	// its own within this attempt (docs/hidden-retries.md).
	Transparent int
	// Hedges counts the hedges a hedging layer below sent within this
	// attempt (package hedge).
	Hedges int
	// Redirects counts the redirect hops a redirect layer below the retry
	// layer followed within this attempt, each a send of its own (not a
	// transparent one); Status is then the last hop's, and each hop's own
	// is on its attempt span.
	Redirects int
	// Held is how long layers below held the attempt before sending (or
	// refusing) it: a concurrency limit's wait for room (package limit).
	Held time.Duration
	// Injected names the faults a chaos layer below injected into this
	// attempt, by kind ("reset", "latency status"): an experiment's
	// failure, not a real one. "" when none.
	Injected string
	// Resend numbers the attempt within its logical operation, retries and
	// redirect hops alike: 0 for the operation's first send.
	Resend   int
	Decision policy.Decision
}

// A PacedWait is a wait before an attempt, not for a retry's backoff: an
// earlier answer from the same host (this operation's or another's of
// the retry layer) asked for no requests until Until, with its
// Retry-After or a spent rate limit (policy.RetryAfter.Pace).
type PacedWait struct {
	Before int       // the attempt it held back, from 1
	Host   string    // the host held, as net/http dials it
	Until  time.Time // when the host allows requests again, as its answer asked
	// Waited is the wait, with up to a tenth more so that the requests
	// held back do not all return together; 0 when the hold ended past
	// the deadline and the operation stopped instead (wait-exceeds-budget).
	Waited time.Duration
}

// String summarises the report on one line, e.g.
// "default: 3 attempts [503 503 200], waits [50ms 100ms], success". Every
// send is on it: an attempt's redirect hops, hedges and the resends the
// transport made on its own follow its status, and an answer the server
// replayed for a keyed request says so.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d attempts [", r.Policy, len(r.Attempts))
	for i, a := range r.Attempts {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a.Err != nil {
			b.WriteString("error")
		} else {
			fmt.Fprint(&b, a.Status)
		}
		// The sends beyond the attempt's own: every send is on the line.
		if a.Redirects > 0 {
			fmt.Fprintf(&b, " (after %d redirect(s))", a.Redirects)
		}
		if a.Hedges > 0 {
			fmt.Fprintf(&b, " (+%d hedge(s))", a.Hedges)
		}
		if a.Transparent > 0 {
			fmt.Fprintf(&b, " (+%d resent by the transport)", a.Transparent)
		}
		if a.Held > 0 {
			fmt.Fprintf(&b, " (held %v below)", a.Held)
		}
		if a.Injected != "" {
			fmt.Fprintf(&b, " (injected: %s)", a.Injected)
		}
	}
	fmt.Fprintf(&b, "], waits %v", r.PlannedWaits)
	for _, p := range r.Paced {
		if p.Waited > 0 {
			fmt.Fprintf(&b, ", paced %v for %s", p.Waited, p.Host)
		} else {
			fmt.Fprintf(&b, ", %s held until %s", p.Host, p.Until.Format(time.RFC3339))
		}
	}
	fmt.Fprintf(&b, ", %s", r.Stop)
	if r.Replayed {
		b.WriteString(" (replayed by the server)")
	}
	if len(r.Pitfalls) > 0 {
		fmt.Fprintf(&b, ", pitfalls %v", r.Pitfalls)
	}
	return b.String()
}

// Hops returns the reports of r's logical operation, first to last: r's
// Previous ones, then r. A retry layer with no redirect layer above it
// runs once per operation: then it is r alone.
func (r *Report) Hops() []*Report {
	var hops []*Report
	for h := r; h != nil; h = h.Previous {
		hops = append(hops, h)
	}
	slices.Reverse(hops)
	return hops
}

// TransparentAttempts is the total of physical sends the transport made on
// its own, beyond the attempts the engine counted.
func (r *Report) TransparentAttempts() int {
	n := 0
	for _, a := range r.Attempts {
		n += a.Transparent
	}
	return n
}

// ReportOf returns the report of the retry layer that produced resp, or nil
// if no retry layer handled it. Behind a redirect layer each hop is a run
// of its own for the retry layer, so this is the last hop's report, with
// the earlier hops' before it (Report.Previous, Report.Hops): together
// the logical operation's whole story. Hooks and telemetry see every hop.
func ReportOf(resp *http.Response) *Report {
	if o, ok := operation.ResultOf(resp).(*httpOp); ok {
		return o.report()
	}
	return nil
}

// failed reports whether the operation ended with an error: its last
// attempt failed and nothing was handed back.
func (r *Report) failed() bool {
	return r.Stop != "" && r.Stop != policy.StopSuccess && (len(r.Attempts) == 0 || r.Attempts[len(r.Attempts)-1].Err != nil)
}

// ReportFrom returns the report an error from a stack carries: an *Error,
// an *ExhaustedError, or a *middleware.StatusError made by a layer above the
// retry layer from its response. It returns nil for any other error.
func ReportFrom(err error) *Report {
	if ee, ok := errors.AsType[*Error](err); ok {
		return ee.Report
	}
	if xe, ok := errors.AsType[*ExhaustedError](err); ok {
		return xe.Report
	}
	if se, ok := errors.AsType[*middleware.StatusError](err); ok {
		return ReportOf(se.Response)
	}
	return nil
}

// Error is returned when an operation ends without a result: its last
// attempt failed, or it was cancelled or ran out of time.
type Error struct {
	Report *Report
	Err    error // the last attempt's error, or the context's
}

func (e *Error) Error() string {
	if e.Report.Stop == policy.StopTimeoutNotRetried {
		return fmt.Sprintf("engine: %s after %d attempt(s): %v (the retry budget did not pay for retrying a timed-out attempt: policy.Default()'s pays only for a client with 20 successes in its last second, so that a fleet does not double a slow service's work; for a client that is alone use policy.Alone(); a request with an Idempotency-Key is retried)", e.Report.Stop, len(e.Report.Attempts), e.Err)
	}
	return fmt.Sprintf("engine: %s after %d attempt(s): %v", e.Report.Stop, len(e.Report.Attempts), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the operation ran out of time: its Policy.Timeout,
// its context's deadline or an attempt's timeout ended it (an attempt
// that timed out and was not retried included). net/http's
// url.Error asks this, so an http.Client.Timeout over a stack reads as a
// timeout whichever clock fires first: net/http's timer or the context's.
func (e *Error) Timeout() bool {
	switch e.Report.Stop {
	case policy.StopDeadline, policy.StopAttemptTimeout, policy.StopTimeoutNotRetried:
		return true
	}
	return false
}

// ExhaustedError is returned, when Config.FailOnExhausted is set, instead of
// a response the policy wanted to retry but could not: the "Ok(503)" an
// unwary caller would take for success.
type ExhaustedError struct {
	Report *Report
	Last   *middleware.StatusError // the last response, its body bounded
	body   error                   // why the request body could not be sent again, when that ended the retries
}

func (e *ExhaustedError) Error() string {
	if e.body != nil {
		return fmt.Sprintf("engine: %s after %d attempt(s): last status %s; not retried: %v", e.Report.Stop, len(e.Report.Attempts), e.Last.Status, e.body)
	}
	return fmt.Sprintf("engine: %s after %d attempt(s): last status %s", e.Report.Stop, len(e.Report.Attempts), e.Last.Status)
}

func (e *ExhaustedError) Unwrap() error { return e.Last }

// Pitfall names a classic retry mistake the engine saw happen.
type Pitfall string

const (
	// PitfallNonIdempotentRetried: a request that is not idempotent was
	// resent after the server may have processed it (POST sent 3 times).
	PitfallNonIdempotentRetried Pitfall = "non-idempotent-retried"
	// PitfallExhaustedRetryableStatus: retries stopped with a retryable
	// status in hand, which is returned as a response, not an error.
	PitfallExhaustedRetryableStatus Pitfall = "exhausted-retryable-status"
	// PitfallBodyNotReplayable: a retry was wanted, but the request body
	// had been sent and has no GetBody.
	PitfallBodyNotReplayable Pitfall = "body-not-replayable"
	// PitfallRetryAfterIgnored: the server's Retry-After could not be
	// parsed and the policy's backoff was used instead.
	PitfallRetryAfterIgnored Pitfall = "retry-after-ignored"
	// PitfallScopeLeak: a request outside the policy's scope was resent
	// (reqwest's scope is checked only from the second retry on).
	PitfallScopeLeak Pitfall = "scope-leak"
	// PitfallBudgetExhausted: a retry was wanted but the client-wide budget
	// had no credit for it (stop budget-exhausted). A timed-out attempt's
	// retry that the budget keeps for clients with recent successes
	// (policy.Default's fleet rule) is not this pitfall: its stop,
	// timeout-not-retried, says why.
	PitfallBudgetExhausted Pitfall = "budget-exhausted"
	// PitfallCookieLost: a discarded response set cookies that no cookie
	// layer stored, because the cookie layer sits outside the retry layer
	// (reqwest's order). Event.Cookies names them.
	PitfallCookieLost Pitfall = "cookie-lost"
)

// Hooks observe operations. Each is called synchronously on the request's
// goroutine, must be quick, must not panic, and may be nil. (One that
// panics anyway does not leak: the engine closes the response it holds and
// ends its deadlines before the panic goes on.) The events point into the
// live report: read it during the call, or copy what you keep.
type Hooks struct {
	OnAttempt func(Event)   // after every attempt, once it is classified (Number, Attempt)
	OnRetry   func(Event)   // when a retry is decided, before its wait (Number, Wait, FromHint, Cause)
	OnGiveUp  func(*Report) // when an operation ends other than with success
	OnPitfall func(Event)   // when a pitfall fires (Pitfall, Cookies)
}

// Event is what a hook is told; each hook's doc names the fields it sets.
type Event struct {
	// Context is the operation's: its values, deadline and span. A
	// request made with it is an operation of its own, not a send of
	// this one.
	Context context.Context
	Report  *Report
	Number  int           // the attempt, from 1 (OnRetry: the attempt that will be retried)
	Attempt AttemptRecord // OnAttempt: the classified attempt
	Wait    time.Duration // OnRetry: the planned wait before the next attempt
	// FromHint reports that the wait comes from the server's Retry-After.
	FromHint bool
	Cause    string   // OnRetry: policy.Decision.Cause
	Pitfall  Pitfall  // OnPitfall: the pitfall
	Cookies  []string // OnPitfall, cookie-lost: the names of the lost cookies, never their values
}

// Join returns hooks that call a's hook, then b's, for each event.
func (a Hooks) Join(b Hooks) Hooks {
	return Hooks{
		OnAttempt: join(a.OnAttempt, b.OnAttempt),
		OnRetry:   join(a.OnRetry, b.OnRetry),
		OnGiveUp:  join(a.OnGiveUp, b.OnGiveUp),
		OnPitfall: join(a.OnPitfall, b.OnPitfall),
	}
}

func join[E any](a, b func(E)) func(E) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(e E) { a(e); b(e) }
}
