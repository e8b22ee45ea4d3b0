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
//   - it carries the DiscardObserver of a layer above the retry layer (the
//     cookie layer), so that retries can show it the responses they throw
//     away.
//
// The outermost layer that cares (redirect, telemetry, or else retry) puts
// one in the context; the layers below share it. It is for authors of
// layers; an application has no reason to touch it.
type Operation struct {
	n       atomic.Int32
	discard DiscardObserver // set and read on the request's goroutine
}

// A DiscardObserver sees each response a retry layer below it throws away,
// before the body is drained; it must not read the body. It returns the
// names of the cookies the response set that are now lost, if any: the
// engine reports them as the cookie-lost pitfall.
type DiscardObserver func(resp *http.Response) (lostCookies []string)

type operationKey struct{}

// WithOperation returns ctx carrying an Operation, and that Operation: the
// one ctx already carries, or a new one.
func WithOperation(ctx context.Context) (context.Context, *Operation) {
	if o := OperationFrom(ctx); o != nil {
		return ctx, o
	}
	o := new(Operation)
	return context.WithValue(ctx, operationKey{}, o), o
}

// OperationFrom returns the Operation ctx carries, or nil.
func OperationFrom(ctx context.Context) *Operation {
	o, _ := ctx.Value(operationKey{}).(*Operation)
	return o
}

// Next records one more send and returns how many came before it: 0 for
// the first send of the operation.
func (s *Operation) Next() int { return int(s.n.Add(1)) - 1 }

// SwapDiscard installs obs as the operation's DiscardObserver and returns
// the previous one, which the caller puts back when its RoundTrip returns:
// so only retry layers below the caller see obs.
func (s *Operation) SwapDiscard(obs DiscardObserver) DiscardObserver {
	prev := s.discard
	s.discard = obs
	return prev
}

// Discard returns the DiscardObserver in force, or nil.
func (s *Operation) Discard() DiscardObserver { return s.discard }

// Count is how many sends the operation has made so far.
func (s *Operation) Count() int { return int(s.n.Load()) }

// A Sender knows the number of the send in flight of its operation: the
// retry layer is one, for the attempts it makes.
type Sender interface{ Resend() int }

type senderKey struct{}

// WithSender returns ctx carrying s, so a layer below (the attempt
// telemetry) can name the send in flight without numbering it again.
func WithSender(ctx context.Context, s Sender) context.Context {
	return context.WithValue(ctx, senderKey{}, s)
}

// SenderFrom returns the Sender ctx carries, or nil. Layers that put one
// in the context may keep more in it (the retry layer keeps its report).
func SenderFrom(ctx context.Context) Sender {
	s, _ := ctx.Value(senderKey{}).(Sender)
	return s
}

// Resend returns the number of the send ctx is for: the Sender's, or else
// the next number of the operation's Sends (0 without one).
func Resend(ctx context.Context) int {
	if s := SenderFrom(ctx); s != nil {
		return s.Resend()
	}
	if o := OperationFrom(ctx); o != nil {
		return o.Next()
	}
	return 0
}
