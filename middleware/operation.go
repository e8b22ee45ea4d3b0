package middleware

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
)

// Operation is what the layers of a stack share about one logical
// operation, across its retries and redirect hops:
//
//   - it numbers the physical sends, as OpenTelemetry's
//     http.request.resend_count does;
//   - it carries the DiscardObserver of a layer above the retry layer (the
//     cookie layer), so that retries can show it the responses they throw
//     away.
//
// The first layer that needs one puts it in the context; the layers below
// share it. Nothing is set up for a request that nobody numbers. It is for
// authors of layers; an application has no reason to touch it, and code a
// layer calls back (hooks) gets a context without it (DetachedContext).
type Operation struct {
	n       atomic.Int32
	discard DiscardObserver // set and read on the request's goroutine
}

// A DiscardObserver sees each response a retry layer below it throws away,
// before the body is drained; it must not read the body. It returns the
// names of the cookies the response set that are now lost, if any: the
// engine reports them as the cookie-lost pitfall.
type DiscardObserver func(resp *http.Response) (lostCookies []string)

// A Sender makes the sends of an operation: the retry layer is one, for
// the attempts it makes. Layers below ask it about the send in flight
// rather than watch the wire a second time.
type Sender interface {
	// Resend is the number of the send in flight within the operation.
	Resend() int
	// Conns counts the connections the transport has handed out for the
	// send in flight so far: one per physical send, its own resends
	// included (docs/hidden-retries.md).
	Conns() int
	// Peer is the remote address of the last connection handed out for
	// the send in flight, or nil.
	Peer() net.Addr
}

type (
	operationKey struct{}
	senderKey    struct{}
)

// OperationContext is a context carrying an Operation. A layer that starts
// the operation can keep it inside an allocation of its own, rather than
// pay for one more context.WithValue and an Operation on every request.
type OperationContext struct {
	context.Context // the parent
	Operation       Operation
}

// Value returns the Operation for this package's key, and asks the parent
// otherwise.
func (c *OperationContext) Value(key any) any {
	if key == (operationKey{}) {
		return &c.Operation
	}
	return c.Context.Value(key)
}

// SenderContext is a context naming the Sender of the requests made under
// it. A retry layer keeps one inside its per-operation state, so the
// requests it sends, and no others, name it.
type SenderContext struct {
	context.Context // the parent
	Sender          Sender
}

// Value returns the Sender for this package's key, and asks the parent
// otherwise.
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

// DetachedContext is a context without the Operation and the Sender of its
// parent, and with everything else: values, deadline, cancellation. A
// layer hands it to the application's code (hooks, callbacks), so that a
// request made with it is an operation of its own.
type DetachedContext struct {
	context.Context // the parent
}

// Value returns nil for this package's keys, and asks the parent
// otherwise.
func (c *DetachedContext) Value(key any) any {
	switch key.(type) {
	case operationKey, senderKey:
		return nil
	}
	return c.Context.Value(key)
}

// WithOperation returns ctx carrying an Operation, and that Operation: the
// one ctx already carries, or a new one.
func WithOperation(ctx context.Context) (context.Context, *Operation) {
	if o := OperationFrom(ctx); o != nil {
		return ctx, o
	}
	c := &OperationContext{Context: ctx}
	return c, &c.Operation
}

// ContinueOperation returns ctx carrying op: for a layer that carries the
// operation of one request into the next it makes (the redirect layer).
func ContinueOperation(ctx context.Context, op *Operation) context.Context {
	return context.WithValue(ctx, operationKey{}, op)
}

// OperationFrom returns the Operation ctx carries, or nil.
func OperationFrom(ctx context.Context) *Operation {
	o, _ := ctx.Value(operationKey{}).(*Operation)
	return o
}

// Next records one more send and returns how many came before it: 0 for
// the first send of the operation.
func (o *Operation) Next() int { return int(o.n.Add(1)) - 1 }

// Count is how many sends the operation has made so far.
func (o *Operation) Count() int { return int(o.n.Load()) }

// SwapDiscard installs obs as the operation's DiscardObserver and returns
// the previous one, which the caller puts back when its RoundTrip returns:
// so only retry layers below the caller see obs.
func (o *Operation) SwapDiscard(obs DiscardObserver) DiscardObserver {
	prev := o.discard
	o.discard = obs
	return prev
}

// Discard returns the DiscardObserver in force, or nil.
func (o *Operation) Discard() DiscardObserver { return o.discard }

// Resend returns the number of the send ctx is for: the Sender's, or else
// the next number of the operation (0 without one).
func Resend(ctx context.Context) int {
	if s := SenderFrom(ctx); s != nil {
		return s.Resend()
	}
	if o := OperationFrom(ctx); o != nil {
		return o.Next()
	}
	return 0
}
