// Package operation is what the layers of one stack share about one
// logical operation, across its retries and redirect hops. It is created
// in one place, where a request enters a stack (middleware.Stack.Then's
// RoundTrip),
// flows down the request's context, and is written in one place too: the
// send counter next to the base transport. Two facts travel upward, and
// only these: the discard observer a cookie layer installs for the retry
// layers below it, and the report the retry layer links to its requests.
package operation

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/policy"
)

// Operation is one logical operation's shared state.
type Operation struct {
	sends    atomic.Int32
	discard  atomic.Pointer[DiscardObserver] // a hedge above runs the layers below on several goroutines
	deadline time.Time                       // the total deadline, fixed by the first retry layer with one
	key      string                          // the Idempotency-Key the first retry layer made, for every hop
	sending  atomic.Pointer[Sending]
	retrying atomic.Pointer[Retrying]

	mu        sync.Mutex // the deadline, the key and the observers
	observers []any      // middleware.Observers, append-only
	obsArr    [1]any     // their first home: no allocation for one (telemetry's); one, so that an operation fits a smaller size class
}

// AddObserver adds x (a middleware.Observer) to the operation.
func (o *Operation) AddObserver(x any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.observers == nil {
		o.observers = o.obsArr[:0]
	}
	o.observers = append(o.observers, x)
}

// Observers returns the operation's observers so far: observers are only
// ever appended, so the slice stays valid outside the lock.
func (o *Operation) Observers() []any {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.observers
}

// Retrying is what the retry layer that owns the operation tells the
// layers below it: the attempt in flight and its retry budget. It is the
// layer's own (no allocation of its own) and is its only writer.
type Retrying struct {
	Attempt atomic.Int32
	Budget  policy.Budget // nil: none
}

// Claim makes r the operation's retry layer unless another retry layer
// (an outer one) owns it; it returns whether r owns it, and then the
// caller calls Unclaim when its RoundTrip returns.
func (o *Operation) Claim(r *Retrying) bool { return o.retrying.CompareAndSwap(nil, r) }

// Unclaim ends r's ownership.
func (o *Operation) Unclaim(r *Retrying) { o.retrying.CompareAndSwap(r, nil) }

// Retry returns the owning retry layer's Retrying, or nil.
func (o *Operation) Retry() *Retrying { return o.retrying.Load() }

// DeadlineSet returns the total deadline a retry layer fixed, if any.
func (o *Operation) DeadlineSet() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deadline, !o.deadline.IsZero()
}

// Key returns the Idempotency-Key a retry layer made for the operation,
// or "".
func (o *Operation) Key() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.key
}

// A Sending is a retry layer sending the operation's requests under the
// operation's own context, so that they need no context (and no request
// copy) of their own: while it is active the context answers for its
// Sender and its wire trace. At most one is active at a time; a retry
// layer that finds one active (two retry layers in one stack) makes its
// own contexts instead.
type Sending struct {
	Sender Sender
	Trace  *httptrace.ClientTrace
	active atomic.Bool
}

// Begin makes s the operation's active Sending, unless another is active
// or the context could not answer for a trace (see TraceKey).
func (o *Operation) Begin(s *Sending) bool {
	if TraceKey == nil {
		return false
	}
	if prev := o.sending.Load(); prev != nil && prev.active.Load() {
		return false
	}
	s.active.Store(true)
	o.sending.Store(s)
	return true
}

// End ends s, which stays the operation's last Sending (see Last).
func (s *Sending) End() { s.active.Store(false) }

// Last is the Sender of the operation's last Sending, active or ended, or
// nil: the retry layer whose response the caller got.
func (o *Operation) Last() Sender {
	if s := o.sending.Load(); s != nil {
		return s.Sender
	}
	return nil
}

func (o *Operation) active() *Sending {
	if s := o.sending.Load(); s != nil && s.active.Load() {
		return s
	}
	return nil
}

// TraceKey is httptrace's context key, learnt by asking for it, or nil if
// a context answering it would not reach httptrace.
var TraceKey = func() any {
	var p keyProbe
	httptrace.ContextClientTrace(&p)
	want := new(httptrace.ClientTrace)
	check := keyProbe{key: p.key, answer: want}
	if p.key == nil || httptrace.ContextClientTrace(&check) != want {
		return nil
	}
	return p.key
}()

// keyProbe records the key it is asked for, or answers key with answer.
type keyProbe struct {
	context.Context
	key    any
	answer any
}

func (p *keyProbe) Value(key any) any {
	if p.answer != nil {
		if key == p.key {
			return p.answer
		}
		return nil
	}
	p.key = key
	return nil
}

// A DiscardObserver sees each response a retry layer below it throws away,
// before the body is drained; it must not read the body. It returns the
// names of the cookies the response set that are now lost.
type DiscardObserver func(resp *http.Response) (lostCookies []string)

// Sends is how many physical sends reached the base transport so far:
// before a send, its http.request.resend_count.
func (o *Operation) Sends() int { return int(o.sends.Load()) }

// SwapDiscard installs obs (a pointer bound once per layer) and returns
// the previous observer, which the caller hands to RestoreDiscard when its
// RoundTrip returns.
func (o *Operation) SwapDiscard(obs *DiscardObserver) (prev *DiscardObserver) {
	return o.discard.Swap(obs)
}

// RestoreDiscard puts prev back, unless another RoundTrip of the layer
// (a hedge's) has installed or restored an observer since: the sends of a
// hedge above interleave, and the last to return must not reinstall an
// observer the first already took away.
func (o *Operation) RestoreDiscard(ours, prev *DiscardObserver) {
	o.discard.CompareAndSwap(ours, prev)
}

// Deadline returns the operation's total deadline: now + timeout for the
// first caller, the same instant for every later one (the retry layer of
// each redirect hop, or of each send of a hedge above it), so a
// Policy.Timeout bounds the whole operation.
func (o *Operation) Deadline(timeout time.Duration) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deadline.IsZero() {
		o.deadline = time.Now().Add(timeout)
	}
	return o.deadline
}

// IdempotencyKey returns the operation's generated Idempotency-Key, making
// it with mint on the first call: every redirect hop's retry layer, and
// every send's of a hedge above it, sends the same one.
func (o *Operation) IdempotencyKey(mint func() string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.key == "" {
		o.key = mint()
	}
	return o.key
}

// Discard is the observer in force, or nil.
func (o *Operation) Discard() DiscardObserver {
	if p := o.discard.Load(); p != nil {
		return *p
	}
	return nil
}

type (
	operationKey struct{}
	senderKey    struct{}
)

// Context is a context carrying a new Operation, in one allocation.
type Context struct {
	context.Context
	Operation Operation
}

// Value answers for the Operation and its active Sending, hides a Sender
// of an enclosing stack (its report is not this operation's), and asks the
// parent otherwise.
func (c *Context) Value(key any) any {
	switch key.(type) {
	case operationKey:
		return &c.Operation
	case senderKey:
		if s := c.Operation.active(); s != nil {
			return s.Sender
		}
		return nil
	}
	if key == TraceKey {
		if s := c.Operation.active(); s != nil {
			return s.Trace
		}
	}
	return c.Context.Value(key)
}

// From returns the Operation ctx carries, or nil.
func From(ctx context.Context) *Operation {
	o, _ := ctx.Value(operationKey{}).(*Operation)
	return o
}

// Start returns a copy of req carrying a new Operation, both in one
// allocation. Every request that enters a stack starts one, even under the
// context of another's: a stack used inside another (as its transport, or
// by a Prepare that fetches a token) counts its own sends, and the
// enclosing one counts each call into it as one send.
func Start(req *http.Request) *http.Request {
	s := new(started)
	s.ctx.Context = req.Context()
	s.req = *req.WithContext(&s.ctx) // WithContext's copy stays on the stack
	return &s.req
}

// started is a request that starts an operation, with its context.
type started struct {
	ctx Context
	req http.Request
}

// Counter is the RoundTripper next to the base transport: it counts each
// send of an operation, and is the counter's only writer.
type Counter struct{ Base http.RoundTripper }

// CloseIdleConnections forwards to the base.
func (c Counter) CloseIdleConnections() { wire.CloseIdle(c.Base) }

// RoundTrip counts the send and makes it.
func (c Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := From(req.Context()); o != nil {
		o.sends.Add(1)
	}
	return c.Base.RoundTrip(req)
}

// A Sender makes the sends of an operation's retry layer and watches them
// on the wire, so layers below ask it rather than watch a second time.
type Sender interface {
	// Conns counts the connections the transport has handed out for the
	// send in flight so far: one per physical send, its own resends
	// included.
	Conns() int
	// Peer is the remote address of the last connection handed out for
	// the send in flight, or nil.
	Peer() net.Addr
	// TimeoutHeader is the name of the cross-layer header that tells the
	// server the time left, or "" when the protocol is off.
	TimeoutHeader() string
}

// A HedgeSender is a Sender that a hedging layer below tells about the
// hedges it sends, and whose retry budget the hedges share.
type HedgeSender interface {
	Sender
	// Hedged counts one more hedge of the send in flight.
	Hedged()
	// HedgeBudget withdraws one retry's worth for a hedge; false: none
	// left. Without a budget it always succeeds.
	HedgeBudget() bool
	// Restamp updates, in a hedge's own header, what the retry layer
	// computed for the send when it began: the time left.
	Restamp(r *http.Request)
}

type hedgeKey struct{}

// WithHedge marks ctx as that of hedge n (1 for the first hedge).
func WithHedge(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, hedgeKey{}, n)
}

// HedgeOf returns the hedge number ctx was marked with, 0 for a send that
// is not a hedge.
func HedgeOf(ctx context.Context) int {
	n, _ := ctx.Value(hedgeKey{}).(int)
	return n
}

// SenderContext names the Sender of the requests made under it.
type SenderContext struct {
	context.Context
	Sender Sender
}

// Value answers for the Sender and asks the parent otherwise.
func (c *SenderContext) Value(key any) any {
	if key == (senderKey{}) {
		return c.Sender
	}
	return c.Context.Value(key)
}

// SenderFrom returns the Sender of the request ctx belongs to, or nil.
func SenderFrom(ctx context.Context) Sender {
	s, _ := ctx.Value(senderKey{}).(Sender)
	return s
}

// Detached is a context without its parent's Operation and Sender, and
// with everything else: what hooks and callbacks get, so that a request
// made with it is an operation of its own.
type Detached struct{ context.Context }

// Value hides this package's keys.
func (c *Detached) Value(key any) any {
	switch key.(type) {
	case operationKey, senderKey:
		return nil
	}
	return c.Context.Value(key)
}
