package engine

import (
	"context"
	"errors"
	"time"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/sethvargo/go-retry"
)

// loopOp is one logical operation as the loop sees it. The HTTP layer
// and Do implement it; the loop calls it only from the caller's goroutine.
type loopOp[T any] interface {
	// attempt sends attempt n (1-based) under ctx.
	attempt(ctx context.Context, n int) (T, attemptInfo, error)
	// decide classifies a finished attempt.
	decide(n int, v T, info attemptInfo, err error) policy.Decision
	// status is v's HTTP status, 0 if it has none.
	status(v T) int
	// hint is v's Retry-After value, "" if none.
	hint(v T) string
	// replayable reports whether the operation can be sent again.
	replayable() bool
	// covered reports whether the policy's scope covers the operation.
	covered() bool
	// unsafe reports whether resending may repeat an effect.
	unsafe(info attemptInfo) bool
	// discard releases a result the loop will not return, and names the
	// cookies it set that nobody stored.
	discard(v T) (lostCookies []string)
	// keep hands v to the caller; d.release must run once v is consumed.
	keep(v T, d deadlines) T
	// statusError reads v into an error for FailOnExhausted; nil if v has
	// no status.
	statusError(v T) *middleware.StatusError
	// abandon releases what the operation holds when no attempt was sent.
	abandon()
	// deadline is the instant a Policy.Timeout of d ends the operation.
	deadline(d time.Duration) time.Time
}

// attemptInfo is what an attempt learnt about the wire.
type attemptInfo struct {
	processed   policy.Processed
	transparent int
	resend      int
}

// deadlines are the contexts that bound a result the caller still reads.
type deadlines struct {
	caller, op, attempt context.Context
	cancelOp, cancelAt  context.CancelFunc // nil when there is nothing to cancel
	rep                 *Report
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
	case d.op.Err() != nil:
		return policy.StopDeadline, true
	case d.attempt.Err() == context.DeadlineExceeded:
		return policy.StopAttemptTimeout, true
	}
	return "", false
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

// run is the retry loop shared by every kind of operation. The hooks get
// hookCtx.
//
// Hooks, the classifier and the operation's callbacks are the caller's
// code: if one panics, run releases the result it holds and the deadlines
// it made, and lets the panic go on.
func run[T any, O loopOp[T]](ctx, hookCtx context.Context, e *Engine, o O, rep *Report) (T, error) {
	var zero T
	start := time.Now()
	opCtx, cancelOp := ctx, context.CancelFunc(nil)
	if e.p.Timeout > 0 {
		opCtx, cancelOp = context.WithDeadline(ctx, o.deadline(e.p.Timeout))
	}
	var (
		held     T    // a result not yet discarded or handed back
		holding  bool // held is set
		d        deadlines
		returned bool
	)
	defer func() {
		if returned {
			return
		}
		if holding {
			o.discard(held)
		}
		d.release()
		if cancelOp != nil {
			cancelOp()
		}
	}()
	end := func(stop policy.StopReason) {
		rep.Stop = stop
		rep.Elapsed = time.Since(start) // the monotonic clock alone: cheaper than Now
		if stop != policy.StopSuccess && e.hooks.OnGiveUp != nil {
			e.hooks.OnGiveUp(rep)
		}
	}
	fail := func(stop policy.StopReason, err error) (T, error) {
		if cancelOp != nil {
			cancelOp()
		}
		end(stop)
		returned = true
		return zero, &Error{Report: rep, Err: err}
	}

	var backoff retry.Backoff // made on the first retry: the success path needs none
	for n := 1; ; n++ {
		if err := opCtx.Err(); err != nil {
			if n == 1 {
				o.abandon()
			}
			return fail(deadlines{caller: ctx, op: opCtx, attempt: opCtx}.mustStop(), err)
		}
		d = deadlines{caller: ctx, op: opCtx, attempt: opCtx, cancelOp: cancelOp, rep: rep}
		if e.p.AttemptTimeout > 0 {
			d.attempt, d.cancelAt = context.WithTimeout(opCtx, e.p.AttemptTimeout)
		}
		v, info, err := o.attempt(d.attempt, n)
		held, holding = v, err == nil
		dec := o.decide(n, v, info, err)
		if !dec.Retry && dec.Stop == "" { // a classifier's zero Decision
			dec = settled(v, err, o)
		}
		overruled := false
		if err != nil {
			// Time and cancellation overrule the classifier: a caller that
			// gave up, or an operation out of time, is never retried.
			if stop, ok := d.stopFor(); ok && (stop != policy.StopAttemptTimeout || !dec.Retry) {
				dec, overruled = policy.Stop(stop), true
			}
		}
		if !dec.Retry && !overruled && e.p.Budget != nil {
			e.p.Budget.Deposit() // a request that needed no retry
		}
		rec := AttemptRecord{Err: err, Processed: info.processed, Transparent: info.transparent, Resend: info.resend, Decision: dec}
		if err == nil {
			rec.Status = o.status(v)
		}
		rep.Attempts = append(rep.Attempts, rec)
		if e.hooks.OnAttempt != nil {
			e.hooks.OnAttempt(AttemptEvent{Context: hookCtx, Report: rep, Attempt: rec, Number: n})
		}

		stop, wait, fromHint := dec.Stop, time.Duration(0), false
		if dec.Retry {
			stop, wait, fromHint = plan(e, hookCtx, opCtx, o, v, err, n, dec.Cause, &backoff, rep)
		}
		if stop != "" {
			if err != nil {
				d.release()
				return fail(stop, err)
			}
			if dec.Retry { // a status the policy wanted to retry: the Ok(503) trap
				if e.failOnExhausted {
					if se := o.statusError(v); se != nil {
						holding = false // statusError closed it
						d.release()
						end(stop)
						returned = true
						return zero, &ExhaustedError{Report: rep, Last: se}
					}
				}
				e.pitfall(hookCtx, rep, PitfallExhaustedRetryableStatus)
			}
			end(stop)
			returned = true
			return o.keep(v, d), nil
		}

		if o.unsafe(info) && dec.Cause != causeAuth { // a 401 refused the request: resending repeats nothing
			e.pitfall(hookCtx, rep, PitfallNonIdempotentRetried)
		}
		if err == nil {
			holding = false
			if lost := o.discard(v); len(lost) > 0 {
				e.pitfall(hookCtx, rep, PitfallCookieLost, lost...)
			}
		}
		d.releaseAttempt()
		rep.PlannedWaits = append(rep.PlannedWaits, wait)
		if e.hooks.OnRetry != nil {
			e.hooks.OnRetry(RetryEvent{Context: hookCtx, Report: rep, Number: n, Wait: wait, FromHint: fromHint, Cause: dec.Cause})
		}
		if err := e.sleep(opCtx, wait); err != nil {
			return fail(deadlines{caller: ctx, op: opCtx, attempt: opCtx}.mustStop(), err)
		}
	}
}

// settled makes a decision that neither retries nor names a stop (a
// classifier's zero Decision) a stop: without one the loop would resend
// forever, outside every limit.
func settled[T any, O loopOp[T]](v T, err error, o O) policy.Decision {
	if err != nil || o.status(v) >= 400 {
		return policy.Stop(policy.StopNonRetryable)
	}
	return policy.Stop(policy.StopSuccess)
}

// plan decides whether a wanted retry happens and how long to wait first.
// It returns a stop reason when it does not.
func plan[T any, O loopOp[T]](e *Engine, hookCtx, opCtx context.Context, o O, v T, err error, n int, cause string, backoff *retry.Backoff, rep *Report) (stop policy.StopReason, wait time.Duration, fromHint bool) {
	if !o.covered() {
		if !e.p.Scope.FromSecondRetry || n > 1 {
			return policy.StopOutOfScope, 0, false
		}
		e.pitfall(hookCtx, rep, PitfallScopeLeak) // reqwest's quirk: resent once anyway
	}
	if n >= e.p.MaxAttempts {
		return policy.StopAttemptsExhausted, 0, false
	}
	if !o.replayable() {
		e.pitfall(hookCtx, rep, PitfallBodyNotReplayable)
		return policy.StopBodyNotReplayable, 0, false
	}
	if cause == causeAuth {
		return "", 0, false // fresh credentials: at once
	}
	if *backoff == nil {
		*backoff = e.p.Backoff.New(e.p.Rand)
	}
	wait, done := (*backoff).Next()
	if done { // a go-retry backoff of the user's that has no more waits
		return policy.StopAttemptsExhausted, 0, false
	}
	ra := e.p.RetryAfter
	if h := ""; err == nil && ra.Use != policy.HintIgnore {
		h = o.hint(v)
		hw, ok := ra.Parse(h, e.now())
		switch {
		case h == "":
		case !ok && ra.StopOnUnsupported:
			return policy.StopUnsupportedRetryAfter, 0, false
		case !ok:
			e.pitfall(hookCtx, rep, PitfallRetryAfterIgnored)
		case ra.Max > 0 && hw > ra.Max:
			return policy.StopWaitExceedsBudget, 0, false // never shorten a hint
		case ra.Use == policy.HintOverride || hw >= wait:
			wait, fromHint = hw, true
		}
	}
	if dl, ok := opCtx.Deadline(); ok && wait > 0 && !e.now().Add(wait).Before(dl) {
		return policy.StopWaitExceedsBudget, 0, false // a wait that cannot finish is not started
	}
	// Last: the budget pays only for a retry that will be sent.
	if e.p.Budget != nil && !e.p.Budget.Withdraw() {
		e.pitfall(hookCtx, rep, PitfallBudgetExhausted)
		return policy.StopBudgetExhausted, 0, false
	}
	return "", wait, fromHint
}

func (e *Engine) pitfall(ctx context.Context, rep *Report, p Pitfall, cookies ...string) {
	rep.Pitfalls = append(rep.Pitfalls, p)
	if e.hooks.OnPitfall != nil {
		e.hooks.OnPitfall(PitfallEvent{Context: ctx, Report: rep, Pitfall: p, Cookies: cookies})
	}
}
