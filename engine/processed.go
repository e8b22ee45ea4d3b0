package engine

import (
	"context"
	"errors"
	"net"

	"github.com/retrystack/retrystack/policy"
)

// processedBy says whether the server may have acted on a request whose
// attempt failed with err; wrote reports whether the request's headers were
// written (httptrace's WroteHeaders), gotConn whether a connection was
// handed out for it. A dial failure, a refused stream and anything that
// failed before a byte was written are not-sent; a GOAWAY that reaches the
// caller covered the stream (net/http resends the others itself), so it
// may have been processed.
//
// An attempt cut off by its context after it got a connection may have
// left whether or not WroteHeaders was seen: the transport writes on a
// goroutine of its own and reports the write after it, so under load the
// report can come after RoundTrip returned (the soak saw the server
// receive such a stream). Resending it could write twice: it counts as
// sent.
func processedBy(err error, wrote, gotConn bool) policy.Processed {
	if err == nil {
		return policy.Responded
	}
	if isDial(err) || policy.KindOf(err) == policy.ErrorRefusedStream {
		return policy.NotSent
	}
	if !wrote && !(gotConn && cutOff(err)) {
		return policy.NotSent
	}
	return policy.SentNoResponse
}

// cutOff reports whether err is a context's end: a deadline or a
// cancellation, the caller's or the attempt's.
func cutOff(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// isDial reports whether err failed to dial: nothing was sent.
func isDial(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}
