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
