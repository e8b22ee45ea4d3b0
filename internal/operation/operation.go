// Package operation is what the layers of one stack share about one
// logical operation, across its retries, hedges and redirect hops
// (middleware.Operation is its public face). It is created in one place,
// where a request enters a stack (middleware.Stack.Then's RoundTrip, or a
// retry layer used without a Stack), and flows down the request's
// context: the library's one context type. Each value has one writer:
// the send counter next to the base transport counts the sends; the retry
// layer that owns the operation writes the attempt; the first retry layer
// fixes the deadline and the key; a cookie layer installs the discard
// observer for the retry layers below it.
package operation

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/policy"
)

// Operation is one logical operation's shared state. It shares an
// allocation with the request copy that carries it (Started), so what
// most operations never use waits in rare.
type Operation struct {
	sends    atomic.Int32
	flags    atomic.Uint32 // flagEnded, flagCounted
	trace    *wire.Trace
	outer    *wire.Trace                     // the trace of the attempt of an operation this one runs inside (a stack used as another's transport), or nil
	discard  atomic.Pointer[DiscardObserver] // a hedge above runs the layers below on several goroutines
	owner    atomic.Pointer[Owner]
	last     atomic.Pointer[Owner]
	rare     atomic.Pointer[rare]  // nil until needed
	reserved atomic.Pointer[Owner] // the state of the stack's outermost retry layer, allocated with the operation (a Starter's), until that layer takes it (Reserve, Take)

	mu       sync.Mutex    // what follows, and rare's key and observers
	deadline time.Duration // the total deadline, as an offset from epoch; fixed by the first retry layer with one
	obs0     any           // the first observer (telemetry's): no allocation for one
}

// rare is what few operations need: made by the first that does.
type rare struct {
	key  string // the Idempotency-Key the first retry layer made, for every hop (under Operation.mu)
	more []any  // the observers after the first, append-only (under Operation.mu)
}

// rareLocked returns o's rare part, made if need be; o.mu is held.
func (o *Operation) rareLocked() *rare {
	r := o.rare.Load()
	if r == nil {
		r = new(rare)
		o.rare.Store(r)
	}
	return r
}

// epoch is what deadlines are offsets from: a time.Duration is a third of
// a time.Time, and epoch's monotonic reading carries over to each.
var epoch = time.Now()

// An Owner is the retry layer that owns the operation: the outermost one
// of the stack (each redirect hop's in turn). The layers below read what
// it tells them; it is its own record's only writer.
type Owner struct {
	Attempt atomic.Int32 // the attempt in flight, from 1
	// Layer is the retry layer's state: its report (a Result), its
	// budget (OwnerLayer.Budget) and the name of the header telling the
	// server the time left.
	Layer OwnerLayer
}

// OwnerLayer is what a retry layer that owns an operation tells the
// layers below it.
type OwnerLayer interface {
	// Budget is the layer's retry budget, or nil.
	Budget() policy.Budget
	// TimeoutHeader is the name of the header with which the layer tells
	// the server the time left, "" when it sends none.
	TimeoutHeader() string
}

// Budget is w's layer's retry budget, or nil (w nil, or none).
func (w *Owner) Budget() policy.Budget {
	if w == nil {
		return nil
	}
	return w.Layer.Budget()
}

// TimeoutHeader is the name of the header with which w's layer tells the
// server the time left, or "" (w nil, or none sent).
func (w *Owner) TimeoutHeader() string {
	if w == nil {
		return ""
	}
	return w.Layer.TimeoutHeader()
}

// Claim makes w the operation's owner, and its last, unless a retry layer
// (an outer one) owns it; it returns whether w owns it and, if so, the
// last owner before it, which the caller hands to Unclaim when its
// RoundTrip returns.
func (o *Operation) Claim(w *Owner) (prev *Owner, ok bool) {
	if !o.owner.CompareAndSwap(nil, w) {
		return nil, false
	}
	return o.last.Swap(w), true
}

// Unclaim ends w's ownership. w stays the operation's last owner if it
// handed a response back (answered); one that failed gives that place back
// to prev, whose response (a redirect hop's, or the send of a hedge above
// that won while a later send was still on its way here) is the one the
// caller may hold: ResultOf must find that one's state, not the state of
// a send that came late and failed.
func (o *Operation) Unclaim(w, prev *Owner, answered bool) {
	o.owner.CompareAndSwap(w, nil)
	if !answered && prev != nil {
		o.last.CompareAndSwap(w, prev)
	}
}

// Owner is the retry layer owning the operation now, or nil.
func (o *Operation) Owner() *Owner { return o.owner.Load() }

// Last is the last retry layer that owned the operation, or nil: the one
// whose response the caller got, unless a layer that did not own it made
// that response (AttemptOf).
func (o *Operation) Last() *Owner { return o.last.Load() }

// Trace is the operation's wire trace: the retry layer that owns the
// operation resets it before each attempt; the layers below read it.
func (o *Operation) Trace() *wire.Trace { return o.trace }

// Counted reports whether the operation's sends are counted next to the
// base transport (Sends); a retry layer used without a Stack numbers its
// own.
func (o *Operation) Counted() bool { return o.flags.Load()&flagCounted != 0 }

// The operation's flags.
const (
	flagEnded   = 1 << iota // the RoundTrip that started it returned: its trace is no longer answered
	flagCounted             // a Counter counts its sends (it entered through a Stack)
)

// AddObserver adds x (a middleware.Observer) to the operation.
func (o *Operation) AddObserver(x any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs0 == nil {
		o.obs0 = x
		return
	}
	r := o.rareLocked()
	r.more = append(r.more, x) // past what a reader loaded: it never sees the slot written
}

// Observed reports whether the operation has an observer.
func (o *Operation) Observed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.obs0 != nil
}

// EachObserver calls f for each of the operation's observers so far, in
// the order they were added, outside the lock.
func (o *Operation) EachObserver(f func(any)) {
	o.mu.Lock()
	first := o.obs0
	var more []any
	if r := o.rare.Load(); r != nil {
		more = r.more
	}
	o.mu.Unlock()
	if first == nil {
		return
	}
	f(first)
	for _, x := range more {
		f(x)
	}
}

// DeadlineSet returns the total deadline a retry layer fixed, if any.
func (o *Operation) DeadlineSet() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return epoch.Add(o.deadline), o.deadline != 0
}

// Key returns the Idempotency-Key a retry layer made for the operation,
// or "".
func (o *Operation) Key() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.rare.Load(); r != nil {
		return r.key
	}
	return ""
}

// A DiscardObserver sees each response a retry layer below it throws away,
// before the body is drained; it must not read the body. It returns the
// names of the cookies the response set that are now lost.
type DiscardObserver func(resp *http.Response) (lostCookies []string)

// Sends is how many physical sends the operation made so far: each
// request the stack handed the base transport (Counter), and each one the
// transport resent on its own that the retry layer owning the operation
// saw on the wire (AddHidden). Before a send, its
// http.request.resend_count.
func (o *Operation) Sends() int { return int(o.sends.Load()) }

// AddHidden counts n sends the base transport made on its own (a request
// resent on a new connection after a reused one closed, a refused HTTP/2
// stream): written by the retry layer that owns the operation, once its
// attempt has returned.
func (o *Operation) AddHidden(n int) { o.sends.Add(int32(n)) }

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

// Discard is the observer in force, or nil.
func (o *Operation) Discard() DiscardObserver {
	if p := o.discard.Load(); p != nil {
		return *p
	}
	return nil
}

// Deadline returns the operation's total deadline: now + timeout for the
// first caller, the same instant for every later one (the retry layer of
// each redirect hop, or of each send of a hedge above it), so a
// Policy.Timeout bounds the whole operation.
func (o *Operation) Deadline(timeout time.Duration) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deadline == 0 {
		o.deadline = max(time.Since(epoch)+timeout, 1)
	}
	return epoch.Add(o.deadline)
}

// IdempotencyKey returns the operation's generated Idempotency-Key, making
// it with mint on the first call: every redirect hop's retry layer, and
// every send's of a hedge above it, sends the same one.
func (o *Operation) IdempotencyKey(mint func() string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.rareLocked()
	if r.key == "" {
		r.key = mint()
	}
	return r.key
}

type operationKey struct{}

// Context is the library's one context type: a request's context carrying
// its Operation, or (Detach) hiding the operation of its parent.
type Context struct {
	context.Context                 // the caller's
	traced          context.Context // the caller's with the operation's trace (httptrace.WithClientTrace); nil when detached
	op              *Operation
}

// Value answers for the Operation; while the operation runs, every other
// key goes through the context with its trace (httptrace finds it there),
// and afterwards straight to the caller's: a context the caller keeps
// (resp.Request's) no longer reaches a trace that has gone back to its
// pool.
func (c *Context) Value(key any) any {
	if _, ok := key.(operationKey); ok {
		if c.op == nil {
			return nil
		}
		return c.op
	}
	if c.traced != nil && c.op.flags.Load()&flagEnded == 0 {
		return c.traced.Value(key)
	}
	return c.Context.Value(key)
}

// Detach returns ctx without its Operation, with everything else: what
// hooks and callbacks get, so that a request made with it is an operation
// of its own and never shares this one's key or deadline.
func Detach(ctx context.Context) Context { return Context{Context: ctx} }

// DetachedFrom returns the operation whose hooks ctx was made for
// (Detach), or nil: telemetry's hooks ask it, so that they do not record
// again what the operation's observers were told. Only ctx itself is
// asked, not its parents: a context derived from it is someone else's.
func DetachedFrom(ctx context.Context) *Operation {
	if c, ok := ctx.(*Context); ok && c.op == nil {
		return From(c.Context) // the operation of the context it was made from (a hook's: no field for it on every operation)
	}
	return nil
}

// From returns the Operation ctx carries, or nil.
func From(ctx context.Context) *Operation {
	o, _ := ctx.Value(operationKey{}).(*Operation)
	return o
}

// Started is a request that starts an operation, with its context and
// the operation: one allocation, which a retry layer can make larger to
// hold its own state too (a Starter).
type Started struct {
	ctx Context
	op  Operation
	req http.Request
}

// Init makes s carry a copy of req in a new Operation, and returns the
// copy. counted tells whether a Counter below counts its sends. The
// caller calls End when its RoundTrip returns.
//
// Every request that enters a stack starts one, even under the context
// of another's: a stack used inside another (as its transport, or by a
// Prepare that fetches a token) counts its own sends, and the enclosing
// one counts each call into it as one send (its trace, composed with the
// inner one's, sees the inner connections).
func (s *Started) Init(req *http.Request, counted bool) *http.Request {
	parent := req.Context()
	if counted {
		s.op.flags.Store(flagCounted)
	}
	s.op.trace = wire.GetTrace()
	if o := From(parent); o != nil && o.flags.Load()&flagEnded == 0 {
		// The enclosing operation's attempt: this one runs inside another
		// (a stack as another's transport, a Prepare's token request). An
		// operation that has ended (a request made with the context of a
		// response it returned) has given its trace back to the pool.
		s.op.outer = TraceOf(parent)
	}
	s.ctx = Context{Context: parent, traced: s.op.trace.With(parent), op: &s.op}
	s.req = *req.WithContext(&s.ctx) // WithContext's copy stays on the stack
	return &s.req
}

// Operation is the operation s started.
func (s *Started) Operation() *Operation { return &s.op }

// Start returns a copy of req carrying a new Operation, both in one
// allocation (see Started.Init).
func Start(req *http.Request, counted bool) (*http.Request, *Operation) {
	s := new(Started)
	return s.Init(req, counted), &s.op
}

// End ends the operation's RoundTrip: its trace goes back to the pool and
// its context answers only for the operation.
func (o *Operation) End() {
	o.flags.Or(flagEnded)
	wire.PutTrace(o.trace)
}

// A Starter is a layer that starts the operations of the stack it is in
// itself, with its own state in the same allocation (the retry layer): the
// stack asks the outermost one. It hands its state to itself with Reserve
// and Take.
type Starter interface {
	StartOperation(req *http.Request) (*http.Request, *Operation)
}

// Reserve keeps w, the state of a Starter allocated with the operation,
// for that layer's RoundTrip to Take.
func (o *Operation) Reserve(w *Owner) { o.reserved.Store(w) }

// Take returns what Reserve kept and forgets it, or nil: once, whichever
// of the layer's RoundTrips asks first (a hedge above it runs several).
func (o *Operation) Take() *Owner {
	if o.reserved.Load() == nil {
		return nil
	}
	return o.reserved.Swap(nil)
}

// A Member is a layer that needs to know it is inside a Stack: one used
// without a Stack starts operations of its own, even under the context of
// another's (a Prepare's token request, a request made with
// resp.Request.Context()), so it never shares that one's key or deadline.
type Member interface{ InStack() }

// Counter is the RoundTripper next to the base transport: it counts each
// send of an operation, and is the counter's only writer.
type Counter struct{ Base http.RoundTripper }

// CloseIdleConnections forwards to the base.
func (c Counter) CloseIdleConnections() { wire.CloseIdle(c.Base) }

// RoundTrip counts the send and makes it.
func (c Counter) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := From(req.Context()); o != nil {
		if o.sends.Add(1) > 1 && o.outer != nil {
			// The enclosing operation sees this send's connection through
			// its trace: it is this stack's own, not a resend of the
			// enclosing one's transport.
			o.outer.NestedSend()
		}
	}
	return c.Base.RoundTrip(req)
}

// A Result is a retry layer's state (Owner.Layer) as the layers above it
// read it once its operation has returned: engine.ReportOf's report.
type Result interface {
	// Failed reports whether the operation ended with an error: it
	// handed no response back.
	Failed() bool
}

// ResultOf returns the Result of the retry layer that produced resp, or
// nil if none did: the operation's last owner, unless that one failed and
// resp is the response of a retry layer per send of a hedge above it
// (whose send won: the owner's lost, and the hedge layer waited for it).
func ResultOf(resp *http.Response) Result {
	if resp == nil || resp.Request == nil {
		return nil
	}
	ctx := resp.Request.Context()
	op := From(ctx)
	if op == nil {
		return nil
	}
	var last Result
	if w := op.Last(); w != nil {
		last, _ = w.Layer.(Result)
	}
	if a := AttemptOf(ctx); a != nil && (last == nil || last.Failed()) {
		if r, ok := a.Owner.Layer.(Result); ok {
			return r
		}
	}
	return last // the outermost retry layer's, as usual
}

type attemptKey struct{}

// An Attempt is the retry layer that does not own its operation (one
// inside another, or one per send of a hedge above it) and the trace of
// its own with which it watches the wire, marked on its attempts'
// contexts (WithAttempt).
type Attempt struct {
	Owner *Owner
	Trace *wire.Trace
}

// WithAttempt marks ctx as that of an attempt of a's retry layer.
func WithAttempt(ctx context.Context, a *Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// AttemptOf returns what WithAttempt marked ctx with, or nil.
func AttemptOf(ctx context.Context) *Attempt {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	return a
}

// TraceOf is the wire trace of the retry layer whose attempt ctx is, for
// the layers below it that mark their sends on it (a redirect's hops, a
// hedge's sends): the innermost retry layer's own (WithAttempt), else
// the operation's; nil outside an operation.
func TraceOf(ctx context.Context) *wire.Trace {
	if a := AttemptOf(ctx); a != nil {
		return a.Trace
	}
	if o := From(ctx); o != nil {
		return o.trace
	}
	return nil
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
