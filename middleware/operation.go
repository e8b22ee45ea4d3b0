package middleware

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Operation is what the layers of a stack share about one logical
// operation, across its retries and redirect hops:
//
//   - it numbers the physical sends, as OpenTelemetry's
//     http.request.resend_count does;
//   - it names the Sender of the latest send (the retry layer), so a layer
//     below can tell which send it carries and a caller can find the retry
//     layer's report afterwards;
//   - it carries the DiscardObserver of a layer above the retry layer (the
//     cookie layer), so that retries can show it the responses they throw
//     away.
//
// The first layer that needs one puts it in the context; the layers below
// share it. Nothing is set up for a request that nobody numbers. It is for
// authors of layers; an application has no reason to touch it.
type Operation struct {
	n atomic.Int32
	// set and read on the request's goroutine
	discard DiscardObserver
	sender  Sender
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
	// Transparent counts the extra sends the transport has made on its own
	// for it so far (docs/hidden-retries.md).
	Transparent() int
}

type operationKey struct{}

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

// SetSender names s as the sender of the send about to go out. It stays
// in place after the send, so that once the operation is over Sender names
// the layer that made its last send.
func (o *Operation) SetSender(s Sender) { o.sender = s }

// Sender returns the sender of the latest send, or nil.
func (o *Operation) Sender() Sender { return o.sender }

// Resend returns the number of the send ctx is for: the Sender's, or else
// the next number of the operation (0 without one).
func Resend(ctx context.Context) int {
	o := OperationFrom(ctx)
	switch {
	case o == nil:
		return 0
	case o.sender != nil:
		return o.sender.Resend()
	}
	return o.Next()
}
