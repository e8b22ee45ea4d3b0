// Package protocol is the one home of the header names the client and
// server halves of retrystack share, so that the two halves cannot drift
// apart. The exported names of the public packages are these values.
package protocol

// The Idempotency-Key protocol (draft-ietf-httpapi-idempotency-key-header),
// in canonical form: the key, the older name some APIs still accept, and
// the mark of a replayed answer.
const (
	IdempotencyKey  = "Idempotency-Key"
	XIdempotencyKey = "X-Idempotency-Key"
	Replayed        = "Idempotent-Replayed"
)

// The cross-layer protocol's default names (package crosslayer).
const (
	AttemptHeader     = "Retrystack-Attempt"
	TimeoutHeader     = "Retrystack-Timeout-Ms"
	ShouldRetryHeader = "Retrystack-Should-Retry"
)
