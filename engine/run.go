package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retrystack/retrystack/internal/events"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"go.opentelemetry.io/otel/attribute"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/sethvargo/go-retry"
)

// loopOp is one logical operation as the loop sees it: the HTTP layer and
// Do implement it. The loop calls it only from the caller's goroutine.
// What only some operations have, the loop finds once, as the optional
// interfaces below (an HTTP request's replayed body, its host's pacing,
// its carried cookies; the observers of either).
type loopOp[T any] interface {
	// attempt sends attempt n (1-based) under ctx.
	attempt(ctx context.Context, n int) (T, attemptInfo, error)
	// decide classifies a finished attempt.
	decide(n int, v T, info attemptInfo, err error) policy.Decision
	// discard releases a result the loop will not return, and names the
	// cookies it set that nobody stored.
	discard(v T) (lostCookies []string)
	// keep hands v to the caller; d.release must run once v is consumed.
	keep(v T, d deadlines) T
}

// observable is an operation with observers (middleware.Operation.Observe,
// engine.Op.Observer): observed reports whether it has any now, and emit
// tells them of an event.
type observable interface {
	observed() bool
	emit(e middleware.Event)
}

// replayable is an operation whose body may be lost between attempts:
// replayErr says why it cannot be sent again (a body kept as it was sent
// outgrew its replay buffer, or its rewinding Seek failed), or is nil. It
// prepares the body for the next attempt: the loop asks only when it
// plans a retry.
type replayable interface{ replayErr() error }

// paceable is an operation sent to a host that may ask for no requests
// for a while (policy.RetryAfter.Pace): paced is the host the next
// attempt goes to (key: the host held, wire.HostKey; host and port: as
// the spans name the server) and until when it asked for none; the zero
// time when it did not.
type paceable interface {
	paced() (key, host string, port int, until time.Time)
}

// cookieCarrier is an operation that carries the cookies of the results
// it discards on the one it hands back: uncarried names those it cannot
// carry, as it hands back none; cookies shows a result the caller gets
// only as an error (FailOnExhausted) to the cookie layer above, and names
// the cookies lost.
type cookieCarrier[T any] interface {
	uncarried() []string
	cookies(v T) []string
}

// facts are what the loop needs to know of an operation's request, found
// once before its first attempt.
type facts struct {
	replayable bool      // it can be sent again
	covered    bool      // the policy's scope covers it
	idempotent bool      // resending it repeats no effect
	keyed      bool      // it carries an Idempotency-Key: a server that honours it does no work twice
	deadline   time.Time // when a Policy.Timeout ends it; zero without one
	body       io.Closer // closed if no attempt is sent; nil if none
}

// attemptInfo is what an attempt learnt about the wire and its result.
type attemptInfo struct {
	processed   policy.Processed
	transparent int
	hedges      int
	redirects   int
	held        time.Duration // how long layers below held it before sending
	injected    string        // the faults a chaos layer injected, by kind
	resend      int
	status      int         // the result's HTTP status, 0 if it has none
	header      http.Header // the result's header, for its hints; nil if none
}

// deadlines are the contexts that bound a result the caller still reads.
type deadlines struct {
	caller, op, attempt context.Context
	cancelOp, cancelAt  context.CancelFunc // nil when there is nothing to cancel
}

func (d deadlines) release() {
	if d.cancelAt != nil {
		d.cancelAt()
	}
	if d.cancelOp != nil {
		d.cancelOp()
	}
}

// releaseAttempt ends the attempt's own deadline, not the operation's.
func (d deadlines) releaseAttempt() {
	if d.cancelAt != nil {
		d.cancelAt()
	}
}

// stopFor names why a read or an attempt under these deadlines failed.
func (d deadlines) stopFor() (policy.StopReason, bool) {
	switch {
	case d.caller.Err() != nil:
		return callerStop(d.caller), true
	case d.op.Err() != nil, passed(d.op):
		return policy.StopDeadline, true
	case d.attempt.Err() == context.DeadlineExceeded, passed(d.attempt):
		return policy.StopAttemptTimeout, true
	}
	return "", false
}

// passed reports whether ctx's deadline has passed, whether or not its
// timer has run yet: under load a context's timer can run after an answer
// (a service's error at its own, slightly later, deadline) has arrived,
// and the verdict must not depend on which goroutine runs first.
func passed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// mustStop is stopFor for a context known to have ended.
func (d deadlines) mustStop() policy.StopReason {
	if stop, ok := d.stopFor(); ok {
		return stop
	}
	return policy.StopCancelled
}

func callerStop(ctx context.Context) policy.StopReason {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return policy.StopDeadline
	}
	return policy.StopCancelled
}

// loop is one run of the retry loop, shared by every kind of operation.
//
// Hooks, the classifier and the operation's methods are the caller's code:
// if one panics, the loop releases the result it holds and the deadlines
// it made, and lets the panic go on.
type loop[T any] struct {
	e   *Engine
	o   loopOp[T]
	f   facts
	rep *Report // the operation's, filled in as it runs

	// What o has of the optional interfaces: nil when it has not.
	events  observable
	replay  replayable
	pacing  paceable
	carrier cookieCarrier[T]

	caller context.Context // the operation's
	hooks  context.Context // what hooks get
	op     context.Context // caller, bounded by Policy.Timeout
	cancel context.CancelFunc
	start  time.Duration // since epoch: the monotonic clock alone, cheaper than Now
	ended  time.Duration // since epoch, read when an attempt's decision ended the operation; 0: not yet

	backoff  retry.Backoff // made on the first retry: the success path needs none
	d        deadlines     // the attempt in flight's
	held     T             // a result not yet discarded or handed back
	holding  bool          // held is set
	returned bool          // the loop returned: nothing left to release
	polled   bool          // the last retry asks again for a keyed request in flight
	asking   bool          // the retry plan makes is such an ask (set by plan)
	bodyErr  error         // why the body could not be sent again, when that stopped the retries
	paid     int           // the retries Withdraw paid for: a budget that pays back an operation that succeeds gets them back
}

// observed reports whether the operation has observers now.
func (l *loop[T]) observed() bool { return l.events != nil && l.events.observed() }

// replayErr is the operation's replayable.replayErr, nil without one.
func (l *loop[T]) replayErr() error {
	if l.replay == nil {
		return nil
	}
	return l.replay.replayErr()
}

// paced is the operation's paceable.paced, the zero time without one.
func (l *loop[T]) paced() (key, host string, port int, until time.Time) {
	if l.pacing == nil {
		return "", "", 0, time.Time{}
	}
	return l.pacing.paced()
}

// uncarried is the operation's cookieCarrier.uncarried, none without one.
func (l *loop[T]) uncarried() []string {
	if l.carrier == nil {
		return nil
	}
	return l.carrier.uncarried()
}

// cookies is the operation's cookieCarrier.cookies, none without one.
func (l *loop[T]) cookies(v T) []string {
	if l.carrier == nil {
		return nil
	}
	return l.carrier.cookies(v)
}

// inFlight names the stop of an operation that ended while the server
// was still processing its keyed request (polling: this attempt's answer
// said so; l.polled: the one before, and time ran out since): the write
// may yet complete, which neither "deadline" nor "attempts-exhausted"
// says.
func (l *loop[T]) inFlight(stop policy.StopReason, polling bool) policy.StopReason {
	switch stop {
	case policy.StopAttemptsExhausted, policy.StopWaitExceedsBudget, policy.StopBudgetExhausted:
		if polling {
			return policy.StopKeyInFlight
		}
	case policy.StopDeadline, policy.StopAttemptTimeout:
		if polling || l.polled {
			return policy.StopKeyInFlight
		}
	}
	return stop
}

// epoch is what the loop's clock readings are offsets from: time.Since
// reads the monotonic clock alone.
var epoch = time.Now()

// run runs o to its end under e's policy, filling in rep; the hooks get
// hookCtx.
func run[T any](ctx, hookCtx context.Context, e *Engine, o loopOp[T], f facts, rep *Report) (T, error) {
	l := loop[T]{e: e, o: o, rep: rep, f: f, caller: ctx, hooks: hookCtx, op: ctx, start: time.Since(epoch)}
	l.events, _ = o.(observable)
	l.replay, _ = o.(replayable)
	l.pacing, _ = o.(paceable)
	l.carrier, _ = o.(cookieCarrier[T])
	if e.p.Timeout > 0 {
		l.op, l.cancel = context.WithDeadline(ctx, f.deadline)
	}
	defer l.release()
	for n := 1; ; n++ {
		if err := l.op.Err(); err != nil {
			if n == 1 && f.body != nil {
				f.body.Close()
			}
			return l.fail(l.inFlight(l.timeUp().mustStop(), false), err)
		}
		if n > 1 {
			if stop, err := l.bodyLost(); err != nil {
				return l.fail(stop, err)
			}
		}
		// A retry's plan waits for the host's hold as it was then (plan),
		// so that a stop still hands back the answer it has; a hold that a
		// later answer made longer meanwhile holds the retry here too.
		if key, host, port, until := l.paced(); !until.IsZero() {
			if stop, err := l.pace(n, key, host, port, until); err != nil {
				if n == 1 && f.body != nil {
					f.body.Close()
				}
				return l.fail(stop, err)
			}
		}
		v, info, dec, err := l.attempt(n)
		stop, wait, fromHint := dec.Stop, time.Duration(0), false
		l.asking = false
		if dec.Retry {
			stop, wait, fromHint = l.plan(n, info, err, dec.Cause)
		}
		polling := dec.Retry && (dec.Cause == protocol.CauseKeyInFlight || l.asking)
		if stop != "" {
			return l.finish(l.inFlight(stop, polling), v, err, dec)
		}
		l.polled = polling
		if err := l.retry(n, v, info, err, dec, wait, fromHint); err != nil {
			return l.fail(l.inFlight(l.timeUp().mustStop(), false), err)
		}
	}
}

// bodyLost stops a planned retry whose request body can no longer be sent
// again: the last attempt's writer read it past the replay buffer after
// the retry was planned (discard retires that writer, so only a read
// already under way can). The retry paid for is paid back; the answer it
// replaced is gone, so the operation ends with the body's error.
func (l *loop[T]) bodyLost() (policy.StopReason, error) {
	err := l.replayErr()
	if err == nil {
		return "", nil
	}
	l.bodyErr = err
	l.pitfall(PitfallBodyNotReplayable)
	if r, ok := l.e.p.Budget.(refunder); ok && l.paid > 0 {
		r.Refund()
		l.paid--
	}
	return policy.StopBodyNotReplayable, err
}

// release frees what a loop that did not return still holds: it ran only
// if a panic ended it.
func (l *loop[T]) release() {
	if l.returned {
		return
	}
	if l.holding {
		l.o.discard(l.held)
	}
	l.d.release()
	if l.cancel != nil {
		l.cancel()
	}
}

// timeUp are deadlines for telling why the operation's context ended.
func (l *loop[T]) timeUp() deadlines {
	return deadlines{caller: l.caller, op: l.op, attempt: l.op}
}

// attempt sends attempt n, decides on it and records it.
func (l *loop[T]) attempt(n int) (T, attemptInfo, policy.Decision, error) {
	e := l.e
	l.d = deadlines{caller: l.caller, op: l.op, attempt: l.op, cancelOp: l.cancel}
	if e.p.AttemptTimeout > 0 {
		l.d.attempt, l.d.cancelAt = context.WithTimeout(l.op, e.p.AttemptTimeout)
	}
	v, info, err := l.o.attempt(l.d.attempt, n)
	if err == nil && (l.op.Err() != nil || passed(l.op)) {
		// The answer came as the caller's deadline passed (or it gave up):
		// its body could not be read in time, and a late answer is a
		// failure. The context's error is the result.
		if lost := l.o.discard(v); len(lost) > 0 {
			l.pitfall(PitfallCookieLost, lost...)
		}
		var zero T
		v, err = zero, l.op.Err()
		if err == nil {
			err = context.DeadlineExceeded // its timer has not run yet
		}
	}
	l.held, l.holding = v, err == nil
	refusal, refused := errors.AsType[policy.Refusal](err)
	var dec policy.Decision
	if refused {
		// A layer below refused to send (a breaker, a rate limiter): it
		// names the stop; nothing was sent, and no classifier is asked.
		dec = policy.Stop(refusal.StopReason())
		if l.observed() {
			l.events.emit(middleware.Event{Name: protocol.EventRefusal, Attrs: []attribute.KeyValue{attribute.String(protocol.AttrStopReason, string(dec.Stop))}})
		}
	} else {
		dec = l.o.decide(n, v, info, err)
	}
	if !dec.Retry && dec.Stop == "" { // a classifier's zero Decision, or a refusal that names none
		dec = plainStop(info, err)
	}
	overruled := false
	if err != nil {
		// Time and cancellation overrule the classifier: a caller that
		// gave up, or an operation out of time, is never retried.
		// A refusal names its cause even at the deadline (a limit that
		// waited for room until then): only a cancellation overrules it,
		// so the stop is the same whichever clock fired first.
		if stop, ok := l.d.stopFor(); ok && (stop != policy.StopAttemptTimeout || !dec.Retry) && (!refused || stop == policy.StopCancelled) {
			dec, overruled = policy.Stop(stop), true
		}
	}
	if !dec.Retry {
		// The operation ends with this decision: its end is read now,
		// once, for the report and the budget.
		l.ended = time.Since(epoch)
	}
	if !dec.Retry && !overruled && !refused && e.p.Budget != nil && dec.Stop != policy.StopPushback {
		// A request that needed no retry; not a refusal (nothing was
		// sent) nor a pushback (an overload answer, not a success).
		if b, ok := e.p.Budget.(depositAt); ok {
			b.DepositAt(epoch.Add(l.ended))
		} else {
			e.p.Budget.Deposit()
		}
		if r, ok := e.p.Budget.(refunder); ok && dec.Stop == policy.StopSuccess {
			for ; l.paid > 0; l.paid-- {
				r.Refund() // retries that ended in success pay for themselves
			}
		}
	}
	rec := AttemptRecord{Status: info.status, Err: err, Processed: info.processed, Transparent: info.transparent, Hedges: info.hedges,
		Redirects: info.redirects, Held: info.held, Injected: info.injected, Resend: info.resend, Decision: dec}
	rep := l.rep
	if n == 2 && len(rep.Attempts) == 1 && cap(rep.Attempts) == 1 {
		// A retry outgrew the room for the first attempt: one allocation
		// for every attempt the policy allows (within reason), not one per
		// doubling.
		grown := make([]AttemptRecord, 1, min(e.p.MaxAttempts, 16))
		copy(grown, rep.Attempts)
		rep.Attempts = grown
	}
	rep.Attempts = append(rep.Attempts, rec)
	if e.hooks.OnAttempt != nil {
		e.hooks.OnAttempt(Event{Context: l.hooks, Report: rep, Attempt: rec, Number: n})
	}
	return v, info, dec, err
}

// finish ends the operation with stop, handing back v or err.
func (l *loop[T]) finish(stop policy.StopReason, v T, err error, dec policy.Decision) (T, error) {
	if err != nil {
		l.d.release()
		if l.bodyErr != nil && !errors.Is(err, l.bodyErr) {
			err = fmt.Errorf("%w; not retried: %w", err, l.bodyErr) // what the caller needs: why there was no retry
		}
		return l.fail(stop, err)
	}
	if dec.Retry || dec.Stop == policy.StopPushback { // a status the policy wanted to retry: the Ok(503) trap
		if l.e.failOnExhausted {
			if resp, ok := any(v).(*http.Response); ok {
				if lost := l.cookies(v); len(lost) > 0 {
					l.pitfall(PitfallCookieLost, lost...)
				}
				se := statusError(resp)
				l.holding = false // statusError closed it
				l.d.release()
				l.lose()
				l.end(stop)
				var zero T
				return zero, &ExhaustedError{Report: l.rep, Last: se, body: l.bodyErr}
			}
		}
		l.pitfall(PitfallExhaustedRetryableStatus)
	}
	v = l.o.keep(v, l.d)
	l.lose() // cookies of discarded answers the final one could not carry
	l.end(stop)
	return v, nil
}

// lose fires cookie-lost for the cookies no result will carry: the
// operation hands back an error.
func (l *loop[T]) lose() {
	if lost := l.uncarried(); len(lost) > 0 {
		l.pitfall(PitfallCookieLost, lost...)
	}
}

// fail ends the operation with stop and err.
func (l *loop[T]) fail(stop policy.StopReason, err error) (T, error) {
	if l.cancel != nil {
		l.cancel()
	}
	l.lose()
	l.end(stop)
	var zero T
	return zero, &Error{Report: l.rep, Err: err}
}

func (l *loop[T]) end(stop policy.StopReason) {
	now := l.ended
	if now == 0 {
		now = time.Since(epoch)
	}
	rep := l.rep
	rep.Stop, rep.Elapsed = stop, now-l.start
	if stop != policy.StopSuccess {
		if l.e.hooks.OnGiveUp != nil {
			l.e.hooks.OnGiveUp(rep)
		}
		if l.observed() {
			l.events.emit(middleware.Event{Name: protocol.EventGiveUp, Attrs: []attribute.KeyValue{
				attribute.String(protocol.AttrStopReason, string(stop)), attribute.String(protocol.AttrLayer, l.e.layer)}})
		}
	}
	l.returned = true
}

// retry releases attempt n and waits before the next; an error means the
// operation's context ended first.
func (l *loop[T]) retry(n int, v T, info attemptInfo, err error, dec policy.Decision, wait time.Duration, fromHint bool) error {
	e := l.e
	if info.processed != policy.NotSent && !l.f.idempotent && dec.Cause != causeAuth { // a 401 refused the request: resending repeats nothing
		l.pitfall(PitfallNonIdempotentRetried)
	}
	if err == nil {
		l.holding = false
		if lost := l.o.discard(v); len(lost) > 0 {
			l.pitfall(PitfallCookieLost, lost...)
		}
	}
	l.d.releaseAttempt()
	rep := l.rep
	if rep.PlannedWaits == nil {
		rep.PlannedWaits = make([]time.Duration, 0, min(e.p.MaxAttempts-1, 16)) // one allocation for the waits of the retries the policy allows
	}
	rep.PlannedWaits = append(rep.PlannedWaits, wait)
	if e.hooks.OnRetry != nil {
		e.hooks.OnRetry(Event{Context: l.hooks, Report: rep, Number: n, Wait: wait, FromHint: fromHint, Cause: dec.Cause})
	}
	if l.observed() {
		l.events.emit(middleware.Event{Name: protocol.EventRetry, Attrs: events.RetryAttrs(wait, fromHint, e.layer, dec.Cause)})
	}
	return e.sleep(l.op, wait)
}

// plainStop makes a decision that neither retries nor names a stop (a
// classifier's zero Decision) a stop: without one the loop would resend
// forever, outside every limit.
func plainStop(info attemptInfo, err error) policy.Decision {
	if err != nil || info.status >= 400 {
		return policy.Stop(policy.StopNonRetryable)
	}
	return policy.Stop(policy.StopSuccess)
}

// plan decides whether a wanted retry of attempt n happens and how long to
// wait first. It returns a stop reason when it does not.
func (l *loop[T]) plan(n int, info attemptInfo, err error, cause string) (stop policy.StopReason, wait time.Duration, fromHint bool) {
	e := l.e
	if !l.f.covered {
		if !e.p.Scope.FromSecondRetry || n > 1 {
			return policy.StopOutOfScope, 0, false
		}
		l.pitfall(PitfallScopeLeak) // reqwest's quirk: resent once anyway
	}
	// Asking again for a keyed request the server is still processing
	// sends no work (the server answers from its store): within a
	// deadline it is bounded by time, not by the budget or MaxAttempts,
	// so that a write that succeeded is not reported a conflict, and
	// waits at least minPollWait, whatever the backoff (a zero Backoff
	// would ask in a loop). An ask that failed (it timed out, its
	// connection broke) is asked again the same way: it sent no work
	// either. MaxAttempts 1 still turns retries off.
	_, bounded := l.op.Deadline()
	poll := (cause == protocol.CauseKeyInFlight || (l.polled && err != nil && l.f.keyed)) && bounded && e.p.MaxAttempts > 1
	l.asking = poll
	if n >= e.p.MaxAttempts && !poll {
		return policy.StopAttemptsExhausted, 0, false
	}
	if !l.f.replayable {
		l.pitfall(PitfallBodyNotReplayable)
		return policy.StopBodyNotReplayable, 0, false
	}
	if l.bodyErr = l.replayErr(); l.bodyErr != nil {
		l.pitfall(PitfallBodyNotReplayable)
		return policy.StopBodyNotReplayable, 0, false
	}
	if cause == causeAuth {
		return "", 0, false // fresh credentials: at once
	}
	if l.backoff == nil {
		l.backoff = e.p.Backoff.New(e.p.Rand)
	}
	wait, done := l.backoff.Next()
	if done { // a go-retry backoff of the user's that has no more waits
		return policy.StopAttemptsExhausted, 0, false
	}
	if ra := e.p.RetryAfter; err == nil {
		hw, found, ok := ra.Hint(info.header, e.now())
		switch {
		case !found:
		case !ok && ra.StopOnUnsupported:
			return policy.StopUnsupportedRetryAfter, 0, false
		case !ok:
			l.pitfall(PitfallRetryAfterIgnored)
		case ra.Max > 0 && hw > ra.Max:
			return policy.StopWaitExceedsBudget, 0, false // never shorten a hint
		case ra.Override || hw >= wait:
			wait, fromHint = hw, true
		}
	}
	if _, _, _, until := l.paced(); !until.IsZero() {
		// Another operation's answer holds the host back longer: the
		// retry waits for that too.
		if d := until.Sub(e.now()); d > wait {
			wait, fromHint = d, true
		}
	}
	if poll && wait < minPollWait {
		wait = minPollWait
	}
	if dl, ok := l.op.Deadline(); ok && wait > 0 && !e.now().Add(wait).Before(dl) {
		return policy.StopWaitExceedsBudget, 0, false // a wait that cannot finish is not started
	}
	// Last: the budget pays only for a retry that will be sent.
	if e.p.Budget != nil && !poll {
		if stop := l.withdraw(info, err); stop != "" {
			if stop == policy.StopBudgetExhausted {
				l.pitfall(PitfallBudgetExhausted)
			}
			return stop, 0, false
		}
	}
	return "", wait, fromHint
}

// minPollWait is the least wait before asking again for a keyed request
// the server is still processing: such asks are bounded by the deadline,
// not by the budget, and must not be a loop.
const minPollWait = 100 * time.Millisecond

// afterTimeout is a Budget that pays for the retry of an attempt that
// timed out apart from others (policy.NewEarnedBudget's).
type afterTimeout interface{ WithdrawAfterTimeout() bool }

// refunder is a Budget that pays back the retries of an operation that
// succeeded (policy.NewEarnedBudget's).
type refunder interface{ Refund() }

// depositAt is a Budget told the time of a deposit, so that it need not
// read the clock again (policy.NewEarnedBudget's).
type depositAt interface{ DepositAt(now time.Time) }

// withdraw pays the budget for a retry, or names the stop when it cannot.
// (Asking again for a keyed request in flight is not charged: the server
// answers it from its store, and the deadline bounds it.) Resending an
// attempt that never reached the server (a failed dial, a refused stream)
// costs the server nothing, and the budget nothing; an unkeyed attempt
// that timed out may still be running there, and a budget that prices
// that apart is asked so: its refusal is the stop timeout-not-retried.
func (l *loop[T]) withdraw(info attemptInfo, err error) policy.StopReason {
	b := l.e.p.Budget
	if err != nil && info.hedges == 0 && (isDial(err) || policy.KindOf(err) == policy.ErrorRefusedStream) {
		// Known unsent; not merely unseen, as through a transport that
		// reports nothing. Under a hedge the error is the last send's,
		// and an earlier one may have reached the server: it pays.
		return ""
	}
	if t, ok := b.(afterTimeout); ok && err != nil && !l.f.keyed {
		if stop, _ := l.d.stopFor(); stop == policy.StopAttemptTimeout {
			if !t.WithdrawAfterTimeout() {
				return policy.StopTimeoutNotRetried
			}
			return ""
		}
	}
	if !b.Withdraw() {
		return policy.StopBudgetExhausted
	}
	l.paid++
	return ""
}

// pace waits until a host that asked for no requests allows them again,
// when that comes before the operation's deadline; otherwise it stops the
// operation at once, nothing sent: a wait that cannot finish is not
// started. A hold that a later answer made longer while it waited is
// waited for in turn.
func (l *loop[T]) pace(n int, key, host string, port int, until time.Time) (policy.StopReason, error) {
	for !until.IsZero() {
		if stop, err := l.paceOnce(n, key, host, port, until); err != nil {
			return stop, err
		}
		_, _, _, until = l.paced()
	}
	return "", nil
}

// paceOnce is one wait of pace before attempt n: until the hold as it
// stands. The report records it (Report.Paced).
func (l *loop[T]) paceOnce(n int, key, host string, port int, until time.Time) (policy.StopReason, error) {
	e := l.e
	now := e.now()
	wait := until.Sub(now)
	if wait <= 0 {
		return "", nil
	}
	dl, bounded := l.op.Deadline()
	if bounded && !now.Add(wait).Before(dl) {
		l.rep.Paced = append(l.rep.Paced, PacedWait{Before: n, Host: key, Until: until})
		if l.observed() {
			l.events.emit(middleware.Event{Name: protocol.EventPacing, Attrs: events.PacingAttrs(host, port, "stopped", wait)})
		}
		return policy.StopWaitExceedsBudget, &pacedError{host: key, until: until}
	}
	// Up to a tenth more, within the deadline: the operations held back
	// do not all return at the reset together.
	draw := rand.Float64
	if e.p.Rand != nil {
		draw = e.p.Rand
	}
	if extra := time.Duration(draw() * float64(wait) / 10); !bounded || now.Add(wait+extra).Before(dl) {
		wait += extra
	}
	l.rep.Paced = append(l.rep.Paced, PacedWait{Before: n, Host: key, Until: until, Waited: wait})
	if l.observed() {
		l.events.emit(middleware.Event{Name: protocol.EventPacing, Attrs: events.PacingAttrs(host, port, "waited", wait)})
	}
	if err := e.sleep(l.op, wait); err != nil {
		return l.timeUp().mustStop(), err
	}
	return "", nil
}

// pitfall records p in the report, and tells the hooks and the
// operation's observers.
func (l *loop[T]) pitfall(p Pitfall, cookies ...string) {
	rep := l.rep
	rep.Pitfalls = append(rep.Pitfalls, p)
	if l.e.hooks.OnPitfall != nil {
		l.e.hooks.OnPitfall(Event{Context: l.hooks, Report: rep, Pitfall: p, Cookies: cookies})
	}
	if l.observed() {
		l.events.emit(middleware.Event{Name: protocol.EventPitfall, Attrs: events.PitfallAttrs(string(p), cookies)})
	}
}

// statusError is resp as ErrorForStatus makes it an error: its status,
// header and first KiB, read within 100 ms; its body is closed.
func statusError(resp *http.Response) *middleware.StatusError {
	_, err := middleware.ErrorForStatus(0).Wrap(middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
		return resp, nil
	})).RoundTrip(resp.Request)
	if se, ok := errors.AsType[*middleware.StatusError](err); ok {
		return se
	}
	// A status below 400 that a classifier retried: no error to read, the
	// response as it is.
	wire.Discard(resp)
	return &middleware.StatusError{Response: resp, StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
}
