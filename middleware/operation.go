package middleware

import (
	"context"
	"iter"
	"net"
	"net/http"
	"time"

	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
)

// Operation is one logical request as the layers of a stack see it: made
// where the request enters the stack (Stack.Then's RoundTrip) and shared
// by every layer below, ours and yours, across its attempts, hedges and
// redirect hops. A layer reads it with OperationOf(req.Context()); each
// value has one writer, named in its method's doc, and no layer writes
// another's. The zero Operation (a request outside any stack) answers 0,
// false and nil.
type Operation struct{ o *operation.Operation }

// OperationOf returns the operation of the request ctx belongs to; ok is
// false outside a stack.
func OperationOf(ctx context.Context) (op Operation, ok bool) {
	o := operation.From(ctx)
	return Operation{o}, o != nil
}

// Attempt is the attempt in flight of the retry layer above (1 for the
// first), or 0 with none. Written by the retry layer that owns the
// operation: the outermost one of the stack, once per attempt; a redirect
// layer above it makes each hop an operation of the retry layer's own,
// numbered from 1. (A hedge layer above the retry layer, not the order
// docs/ordering.md recommends, runs a retry layer per send at once: the
// first owns the operation until it returns, and a later send's layers
// may then read 0.)
func (op Operation) Attempt() int {
	if op.o == nil {
		return 0
	}
	if r := op.o.Owner(); r != nil {
		return int(r.Attempt.Load())
	}
	return 0
}

// Sends is how many physical sends the operation made so far, every
// attempt, hedge and redirect hop counted, and every resend the base
// transport made on its own that the retry layer owning the operation saw
// on the wire: before a send, its http.request.resend_count. Written by
// the stack, next to the base, and by that retry layer after each attempt.
func (op Operation) Sends() int {
	if op.o == nil {
		return 0
	}
	return op.o.Sends()
}

// Deadline is the operation's total deadline, when a retry layer's
// Policy.Timeout set one: fixed by the first retry layer with a Timeout,
// the same for every hop. (A request's own context may end sooner: read
// req.Context().Deadline() for the attempt in flight.)
func (op Operation) Deadline() (time.Time, bool) {
	if op.o == nil {
		return time.Time{}, false
	}
	return op.o.DeadlineSet()
}

// IdempotencyKey is the key a retry layer made for the operation
// (Policy.IdempotencyKeys), the same on every attempt and hop, or "".
// Written by the first retry layer that makes one.
func (op Operation) IdempotencyKey() string {
	if op.o == nil {
		return ""
	}
	return op.o.Key()
}

// Budget is the retry budget of the retry layer that owns the operation,
// or nil: a layer that sends more than it was asked to (a hedge, a
// retry of its own) withdraws from it, so that no layer doubles a storm.
// Written by that retry layer.
func (op Operation) Budget() policy.Budget {
	if op.o == nil {
		return nil
	}
	return op.o.Owner().Budget()
}

// TimeoutHeader is the name of the header with which the retry layer
// that owns the operation tells the server the time left, or "" when it
// sends none: a layer that copies a request to send it later (a hedge)
// sets it again on the copy (the value counts down). Written by that
// retry layer.
func (op Operation) TimeoutHeader() string {
	if op.o == nil {
		return ""
	}
	return op.o.Owner().TimeoutHeader()
}

// CountRedirect tells the retry layer above that the request about to go
// out under ctx follows a redirect: the retry layer's report counts it in
// the attempt's Redirects, not as a resend the transport made on its own.
// A redirect layer below a retry layer calls it before each hop after the
// first. Outside a stack it does nothing.
func (op Operation) CountRedirect(ctx context.Context) {
	if tr := operation.TraceOf(ctx); tr != nil {
		tr.Hopped()
	}
}

// CountHedge tells the retry layer above that a request about to go out
// alongside the one sent under ctx is a hedge: the retry layer's report
// counts it in the attempt's Hedges, not as a resend the transport made
// on its own. Pair it with Operation.WithHedge on the hedge's context.
// Outside a stack it does nothing.
func (op Operation) CountHedge(ctx context.Context) {
	if tr := operation.TraceOf(ctx); tr != nil {
		tr.Hedged()
	}
}

// MarkInjected tells the retry layer above that the attempt under ctx
// met a fault injected on purpose (the chaos layer's, of kind fault): the
// attempt's record names it, so that a report never passes an experiment's
// fault off as a real failure. Outside a stack it does nothing.
func (op Operation) MarkInjected(ctx context.Context, fault string) {
	if tr := operation.TraceOf(ctx); tr != nil {
		tr.Inject(fault)
	}
}

// MarkHeld tells the retry layer above that a layer below held the
// attempt under ctx for d before sending it, or refusing it (a
// concurrency limit's wait for room): the attempt's record counts it
// (AttemptRecord.Held). Outside a stack it does nothing.
func (op Operation) MarkHeld(ctx context.Context, d time.Duration) {
	if tr := operation.TraceOf(ctx); tr != nil {
		tr.Hold(d)
	}
}

// WithHedge marks ctx as the context of hedge n of a send (1 for the
// first hedge), for the layers below: telemetry's attempt span carries
// the number.
func (op Operation) WithHedge(ctx context.Context, n int) context.Context {
	return operation.WithHedge(ctx, n)
}

// Hedge is the hedge number WithHedge marked ctx with, 0 for a send that
// is not a hedge.
func (op Operation) Hedge(ctx context.Context) int { return operation.HedgeOf(ctx) }

// Wire is what the transport reported of the sends of a retry layer's
// attempt so far (httptrace): a layer that traces each send reads it
// before and after its own, as telemetry's attempt layer does.
type Wire struct {
	// Conns counts the connections the transport handed out: one per
	// physical send, the transport's own resends included.
	Conns int
	// Marked counts the sends that layers below the retry layer made
	// on purpose and marked (CountHedge, CountRedirect): the others the
	// transport made on its own.
	Marked int
	// Peer is the last connection's remote address, nil if none.
	Peer net.Addr
}

// Wire is what the transport reported so far of the attempt in flight
// under ctx of the retry layer above (the innermost one), or of the
// operation's sends without one. The retry layer starts it again at each
// attempt. Outside a stack it is the zero Wire.
func (op Operation) Wire(ctx context.Context) Wire {
	tr := operation.TraceOf(ctx)
	if tr == nil {
		return Wire{}
	}
	return Wire{Conns: tr.Conns(), Marked: tr.Hedges() + tr.Hops(), Peer: tr.Peer()}
}

// A DiscardObserver sees each response that a retry layer below throws
// away for a retry, before its body is drained; it must not read the
// body. It returns the names of the cookies the response set that are
// now lost (the retry layer fires PitfallCookieLost with them).
type DiscardObserver func(resp *http.Response) (lostCookies []string)

// ObserveDiscards makes obs the observer of the responses the retry
// layers below throw away, until RestoreDiscards; it returns the observer
// it replaced. A layer binds obs once (a field of its own) and calls,
// within its RoundTrip:
//
//	prev := op.ObserveDiscards(&t.obs)
//	defer op.RestoreDiscards(&t.obs, prev)
//
// The cookie layer does, so a discarded response's cookies reach its jar.
// Outside a stack it does nothing.
func (op Operation) ObserveDiscards(obs *DiscardObserver) (prev *DiscardObserver) {
	if op.o == nil {
		return nil
	}
	return (*DiscardObserver)(op.o.SwapDiscard((*operation.DiscardObserver)(obs)))
}

// RestoreDiscards puts back the observer ObserveDiscards replaced, unless
// another RoundTrip of the same layer (a hedge's, on another goroutine)
// changed it since.
func (op Operation) RestoreDiscards(ours, prev *DiscardObserver) {
	if op.o != nil {
		op.o.RestoreDiscard((*operation.DiscardObserver)(ours), (*operation.DiscardObserver)(prev))
	}
}

// An Event is something that happened in a layer during an operation: a
// circuit breaker changing state, a hedge, a refusal. The layer emits it
// on the operation (Operation.Emit) and every observer of the operation is
// told (Operation.Observe): telemetry makes each an event of the
// operation's span, and counts some in metrics, without importing the
// layer. Name yours with a prefix of your own; ours start with
// "retrystack.".
type Event struct {
	Name  string
	Attrs []attribute.KeyValue
}

// The events the library's layers emit, by name (their attributes are in
// docs/architecture.md): the retry layer's response discarded for a
// retry, retry planned (its wait and cause), pitfall, and refusal by a
// layer below (its stop reason); a hedge sent; a circuit breaker's state
// change; a request the throttle refused; an attempt that waited for a
// host's rate limit to reset, or stopped because the reset came after its
// deadline (pacing, see policy.RetryAfter.Pace); a request the concurrency
// limit refused; a fault the chaos layer injected; an operation the retry
// layer (or engine.Do) ended without success, its stop reason.
const (
	EventDiscarded     = protocol.EventDiscarded
	EventRetry         = protocol.EventRetry
	EventPitfall       = protocol.EventPitfall
	EventRefusal       = protocol.EventRefusal
	EventHedge         = protocol.EventHedge
	EventBreakerChange = protocol.EventBreaker
	EventThrottle      = protocol.EventThrottle
	EventLimit         = protocol.EventLimit
	EventChaos         = protocol.EventChaos
	EventPacing        = protocol.EventPacing
	EventGiveUp        = protocol.EventGiveUp
)

// An Observer is told the events of the operations it observes, on the
// goroutine of the layer that emits each (a hedge's sends run on their
// own): it must be safe for concurrent use, and quick.
type Observer interface{ Observe(Event) }

// Observe adds o to the operation's observers, for the rest of the
// operation. Outside a stack it does nothing.
func (op Operation) Observe(o Observer) {
	if op.o != nil {
		op.o.AddObserver(o)
	}
}

// ShowDiscarded shows resp, a response the calling layer throws away
// instead of handing it up (a redirect layer's hop), to the observer of
// discarded responses (ObserveDiscards: a cookie layer above, which
// stores the cookies it set), before the caller drains it. It returns
// the names of the cookies that observer did not store; nil without an
// observer, or outside a stack.
func (op Operation) ShowDiscarded(resp *http.Response) (lostCookies []string) {
	if op.o == nil {
		return nil
	}
	if obs := op.o.Discard(); obs != nil {
		return obs(resp)
	}
	return nil
}

// Observers are the operation's observers so far, in the order they were
// added: a layer finds its own there (telemetry's attempt layer finds the
// operation span of the layer above). Outside a stack there are none.
func (op Operation) Observers() iter.Seq[Observer] {
	return func(yield func(Observer) bool) {
		if op.o == nil {
			return
		}
		done := false
		op.o.EachObserver(func(x any) {
			if !done && !yield(x.(Observer)) {
				done = true
			}
		})
	}
}

// Emit tells e to the operation's observers. Outside a stack it does
// nothing.
func (op Operation) Emit(e Event) {
	if op.o == nil {
		return
	}
	op.o.EachObserver(func(x any) { x.(Observer).Observe(e) })
}
