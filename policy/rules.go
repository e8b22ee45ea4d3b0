package policy

import (
	"net/http"
	"strings"

	"github.com/retrystack/retrystack/internal/protocol"
)

// Rules builds the usual classifier from its parts: assign its
// [Rules.Classify] method to [Policy.Classify]. A Rules value is read-only
// once in use.
type Rules struct {
	// Statuses are the response statuses to retry. Other statuses stop the
	// operation: below 400 as a success, from 400 on as non-retryable.
	Statuses StatusSet
	// Errors picks the transport errors to retry; nil retries none.
	Errors func(ErrorKind) bool
	// Safe picks the requests that may be retried whatever happened to
	// them; nil means Idempotent (an idempotent method or an idempotency
	// key). The others stop with not-idempotent. To retry every request,
	// a POST included, as naive clients do (reqwest's classifiers, Codex),
	// and send a POST three times, spell it out:
	// func(*http.Request) bool { return true }. Operations without a
	// request (Attempt.Request nil) are always safe.
	Safe func(*http.Request) bool
	// ResendUnsentUnsafe lets a request Safe refuses be retried when the
	// attempt was not sent, so it cannot have had an effect.
	ResendUnsentUnsafe bool
	// RateLimits retries a 403 or 429 whose rate-limit fields say nothing
	// remains and when that ends (X-RateLimit-Remaining: 0 with
	// X-RateLimit-Reset, as GitHub's primary rate limit answers; the same
	// RateLimit-* pair; a RateLimit item with r=0 and t), with the cause
	// "rate-limited": the wait is then the reset, taken as a Retry-After
	// hint (RetryAfter.Hint). Without a reset it can read, the status
	// stands.
	RateLimits bool
}

// Classify decides on one attempt. It does not allocate.
//
// Whatever the parts say, it follows the idempotency protocol
// (draft-ietf-httpapi-idempotency-key-header): an answer marked
// Idempotent-Replayed is final (asking again gets the same stored
// answer), and a 409 problem detail (application/problem+json, the
// draft's answer) to a request with an Idempotency-Key, which says the
// same key is still being processed, is retried with the cause
// "key-in-flight": the engine asks again within the operation's deadline.
// Another 409 (a conflict of the application's, in another format)
// stands.
func (r Rules) Classify(a Attempt) Decision {
	cause := "status"
	switch {
	case a.Err == nil && a.Response == nil:
		return Stop(StopSuccess) // an operation other than HTTP succeeded
	case a.Err == nil:
		code := a.Response.StatusCode
		if _, replayed := a.Response.Header[protocol.Replayed]; replayed {
			// The idempotency protocol's stored answer: asking again gets
			// the same one.
			if code < 400 {
				return Stop(StopSuccess)
			}
			return Stop(StopNonRetryable)
		}
		if code == http.StatusConflict && a.Request != nil && hasIdempotencyKey(a.Request.Header) && problemDetails(a.Response.Header) {
			// The same keyed request is still being processed: its
			// answer will be stored, and asking again gets it.
			return Retry(protocol.CauseKeyInFlight)
		}
		if r.RateLimits && (code == http.StatusForbidden || code == http.StatusTooManyRequests) && rateLimitSpent(a.Response.Header) {
			cause = "rate-limited"
			break
		}
		if !r.Statuses.Has(code) {
			if code < 400 {
				return Stop(StopSuccess)
			}
			return Stop(StopNonRetryable)
		}
	default:
		kind := KindOf(a.Err)
		switch kind {
		case ErrorCanceled:
			return Stop(StopCancelled)
		}
		if r.Errors == nil || !r.Errors(kind) {
			return Stop(StopNonRetryable)
		}
		cause = kind.cause()
	}
	if a.Request != nil && !r.safe(a.Request) && !(r.ResendUnsentUnsafe && a.Processed == NotSent) {
		return Stop(StopNotIdempotent)
	}
	return Retry(cause)
}

func (r Rules) safe(req *http.Request) bool {
	if r.Safe == nil {
		return Idempotent(req)
	}
	return r.Safe(req)
}

// problemDetails reports whether h says its body is an RFC 9457 problem
// detail.
func problemDetails(h http.Header) bool {
	ct := h.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/problem+json")
}
