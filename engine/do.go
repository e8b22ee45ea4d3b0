package engine

import (
	"context"
	"time"

	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/middleware"

	"github.com/retrystack/retrystack/policy"
)

// Op is an operation other than an HTTP request — a stream, an RPC — for
// Do to run under the engine's policy.
type Op[T any] struct {
	// Attempt performs attempt n (1 for the first). ctx carries the
	// attempt's deadline and ends when Do returns.
	Attempt func(ctx context.Context, n int) (T, error)
	// Classify decides on an attempt. nil uses the policy's classifier
	// with only the error and the attempt number set, so a nil error is a
	// success.
	Classify func(n int, v T, err error) policy.Decision
	// Discard releases a result that Do will not return. nil: nothing to
	// release.
	Discard func(v T)
	// Fallback, when set, runs once with a fresh count if the operation
	// ends with its attempts exhausted, as Codex falls back from WebSocket
	// to HTTPS when its stream budget is spent; a second exhaustion ends
	// the operation. The report is then the fallback's, Fallbacks counting
	// the switch.
	Fallback *Op[T]
	// Observer, when set, is told the operation's events as a stack's
	// observers are (middleware.Operation.Observe): each retry planned,
	// pitfall, refusal and the give-up, on the caller's goroutine.
	// telemetry's Telemetry.Observer records them on a span; a
	// middleware.LogObserver logs them.
	Observer middleware.Observer
}

// Do runs op under e's policy (and then its Fallback, if it has one and
// needs it) and returns its result, the operation's report and, when it
// ended without a result, an *Error.
func Do[T any](ctx context.Context, e *Engine, op Op[T]) (T, *Report, error) {
	v, rep, err := do(ctx, e, op)
	if op.Fallback == nil || rep.Stop != policy.StopAttemptsExhausted {
		return v, rep, err
	}
	fb := *op.Fallback
	if fb.Observer == nil {
		fb.Observer = op.Observer // the same operation, to whoever observes it
	}
	v, rep, err = do(ctx, e, fb)
	rep.Fallbacks = 1
	return v, rep, err
}

func do[T any](ctx context.Context, e *Engine, op Op[T]) (T, *Report, error) {
	rep := &Report{Policy: e.p.Name, Layer: e.layer}
	o := &funcOp[T]{e: e, op: op}
	defer o.endAttempt() // whatever the policy: nothing an attempt started outlives Do
	f := facts{replayable: true, covered: true, idempotent: true}
	if e.p.Timeout > 0 {
		f.deadline = time.Now().Add(e.p.Timeout)
	}
	hooks := ctx
	if operation.DetachedFrom(ctx) != nil {
		// An HTTP operation's hooks context, passed on (Do inside a hook):
		// Do's events are its own, for telemetry's hooks too.
		d := operation.Detach(ctx)
		hooks = &d
	}
	v, err := run[T](ctx, hooks, e, o, f, rep)
	return v, rep, err
}

// A Do operation has observers (Op.Observer), and nothing else optional.
var _ observable = (*funcOp[int])(nil)

type funcOp[T any] struct {
	e      *Engine
	op     Op[T]
	cancel context.CancelFunc // ends the attempt in flight's context
}

func (o *funcOp[T]) attempt(ctx context.Context, n int) (T, attemptInfo, error) {
	o.endAttempt() // the previous attempt's result is gone
	ctx, o.cancel = context.WithCancel(ctx)
	v, err := o.op.Attempt(ctx, n)
	info := attemptInfo{processed: policy.Responded}
	if err != nil {
		info.processed = policy.SentNoResponse
	}
	return v, info, err
}

func (o *funcOp[T]) decide(n int, v T, _ attemptInfo, err error) policy.Decision {
	if o.op.Classify != nil {
		return o.op.Classify(n, v, err)
	}
	return o.e.p.Classify(policy.Attempt{Err: err, Number: n})
}

func (o *funcOp[T]) endAttempt() {
	if o.cancel != nil {
		o.cancel()
	}
}

func (o *funcOp[T]) discard(v T) []string {
	if o.op.Discard != nil {
		o.op.Discard(v)
	}
	o.endAttempt()
	return nil
}

func (o *funcOp[T]) keep(v T, d deadlines) T {
	d.release()
	return v
}

func (o *funcOp[T]) observed() bool { return o.op.Observer != nil }

func (o *funcOp[T]) emit(e middleware.Event) { o.op.Observer.Observe(e) }
