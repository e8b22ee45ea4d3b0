package engine

import (
	"errors"
	"net"

	"github.com/retrystack/retrystack/policy"
)

// processedBy says whether the server may have acted on a request whose
// attempt failed with err; wrote reports whether the request's headers were
// written (httptrace's WroteHeaders). A dial failure, a refused stream and
// anything that failed before a byte was written are not-sent; a GOAWAY
// that reaches the caller covered the stream (net/http resends the others
// itself), so it may have been processed.
func processedBy(err error, wrote bool) policy.Processed {
	if err == nil {
		return policy.Responded
	}
	if !wrote || isDial(err) || policy.KindOf(err) == policy.ErrorRefusedStream {
		return policy.NotSent
	}
	return policy.SentNoResponse
}

// isDial reports whether err failed to dial: nothing was sent.
func isDial(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}
