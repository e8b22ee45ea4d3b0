package middleware

import (
	"context"
	"sync/atomic"
)

// Sends numbers the physical attempts of one logical operation across its
// retries and redirect hops alike, as OpenTelemetry's
// http.request.resend_count does. The outermost layer that cares (redirect,
// or else retry) puts one in the context; the layers below share it. It is
// safe for concurrent use.
type Sends struct{ n atomic.Int32 }

type sendsKey struct{}

// WithSends returns ctx carrying a Sends, and that Sends: the one ctx
// already carries, or a new one.
func WithSends(ctx context.Context) (context.Context, *Sends) {
	if s := SendsFrom(ctx); s != nil {
		return ctx, s
	}
	s := new(Sends)
	return context.WithValue(ctx, sendsKey{}, s), s
}

// SendsFrom returns the Sends ctx carries, or nil.
func SendsFrom(ctx context.Context) *Sends {
	s, _ := ctx.Value(sendsKey{}).(*Sends)
	return s
}

// Next records one more send and returns how many came before it: 0 for
// the first send of the operation.
func (s *Sends) Next() int { return int(s.n.Add(1)) - 1 }

// Count is how many sends the operation has made so far.
func (s *Sends) Count() int { return int(s.n.Load()) }

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
	if s := SendsFrom(ctx); s != nil {
		return s.Next()
	}
	return 0
}
