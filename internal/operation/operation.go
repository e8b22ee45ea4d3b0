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
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
)

// Operation is one logical operation's shared state.
type Operation struct {
	sends    atomic.Int32
	discard  DiscardObserver // set and read on the request's goroutine
	deadline time.Time       // the total deadline, fixed by the first retry layer with one
}

// A DiscardObserver sees each response a retry layer below it throws away,
// before the body is drained; it must not read the body. It returns the
// names of the cookies the response set that are now lost.
type DiscardObserver func(resp *http.Response) (lostCookies []string)

// Sends is how many physical sends reached the base transport so far:
// before a send, its http.request.resend_count.
func (o *Operation) Sends() int { return int(o.sends.Load()) }

// SwapDiscard installs obs and returns the previous observer, which the
// caller puts back when its RoundTrip returns.
func (o *Operation) SwapDiscard(obs DiscardObserver) DiscardObserver {
	prev := o.discard
	o.discard = obs
	return prev
}

// Deadline returns the operation's total deadline: now + timeout for the
// first caller, the same instant for every later one (the retry layer of
// each redirect hop), so a Policy.Timeout bounds the whole operation.
func (o *Operation) Deadline(timeout time.Duration) time.Time {
	if o.deadline.IsZero() {
		o.deadline = time.Now().Add(timeout)
	}
	return o.deadline
}

// Discard is the observer in force, or nil.
func (o *Operation) Discard() DiscardObserver { return o.discard }

type (
	operationKey struct{}
	senderKey    struct{}
)

// Context is a context carrying a new Operation, in one allocation.
type Context struct {
	context.Context
	Operation Operation
}

// Value answers for the Operation, hides a Sender of an enclosing stack
// (its report is not this operation's), and asks the parent otherwise.
func (c *Context) Value(key any) any {
	switch key.(type) {
	case operationKey:
		return &c.Operation
	case senderKey:
		return nil
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
