package policy

import "net/http"

// StopReason says why a logical operation ended. The values are stable
// strings, used in reports, telemetry and the lab.
type StopReason string

const (
	StopSuccess               StopReason = "success"                 // a response the classifier accepts
	StopNonRetryable          StopReason = "non-retryable"           // a result the classifier will not retry
	StopAttemptsExhausted     StopReason = "attempts-exhausted"      // retryable, but no attempts left
	StopBudgetExhausted       StopReason = "budget-exhausted"        // retryable, but the retry budget has no credit left
	StopDeadline              StopReason = "deadline"                // the total deadline passed
	StopAttemptTimeout        StopReason = "attempt-timeout"         // the last attempt ran out of time and is not retried
	StopWaitExceedsBudget     StopReason = "wait-exceeds-budget"     // the next wait would end after the deadline, or a hint exceeds RetryAfter.Max
	StopUnsupportedRetryAfter StopReason = "unsupported-retry-after" // a Retry-After hint the policy cannot honour
	StopCancelled             StopReason = "cancelled"               // the caller cancelled
	StopBodyNotReplayable     StopReason = "body-not-replayable"     // retryable, but the body cannot be sent again
	StopNotIdempotent         StopReason = "not-idempotent"          // retryable, but the request may have had effects
	StopOutOfScope            StopReason = "out-of-scope"            // the request is outside the policy's scope
	StopBodyFailed            StopReason = "body-failed"             // the final response's body failed while the caller read it, with no deadline to blame
	StopPushback              StopReason = "pushback"                // the server said not to retry (a layer below already did)
	StopCircuitOpen           StopReason = "circuit-open"            // a circuit breaker inside the retry layer refused to send
	StopThrottled             StopReason = "throttled"               // a throttle inside the retry layer refused to send: the host rejects too much (package throttle)
	StopKeyInFlight           StopReason = "key-in-flight"           // the server was still processing the same keyed request (409) when time or attempts ran out: the write may yet complete
	StopConcurrencyLimited    StopReason = "concurrency-limited"     // a concurrency limit inside the retry layer had no room for the request within its wait (package limit)
	StopTimeoutNotRetried     StopReason = "timeout-not-retried"     // an attempt timed out and the budget keeps timeouts' retries for clients with recent successes ([Default]'s fleet rule; [Alone] retries it)
)

// A Refusal is an error by which a layer refused to send a request (a
// circuit breaker, a rate limiter, a layer of your own): nothing was sent.
// The value names its own stop reason, as a net.Error says whether it is
// a timeout. A retry layer above stops at once with that reason, sends
// nothing more, deposits nothing in its budget, and records the refusal
// in its report, hooks and spans; no classifier is asked. A refusal names
// the stop even when the operation's deadline passed while the layer
// waited for room (a concurrency limit's wait ends at the deadline): the
// refusal says why nothing was sent, the deadline only when; only the
// caller's cancellation overrules it.
type Refusal interface {
	error
	StopReason() StopReason
}

// Processed says whether the server may already have acted on an attempt.
type Processed uint8

const (
	// NotSent: the request never reached the server (dial failed, stream
	// refused, nothing written); resending cannot duplicate an effect.
	NotSent Processed = iota + 1
	// SentNoResponse: the request was sent, at least in part, and no
	// response arrived; the server may have acted.
	SentNoResponse
	// Responded: a response arrived.
	Responded
)

func (p Processed) String() string {
	switch p {
	case NotSent:
		return "not-sent"
	case SentNoResponse:
		return "sent-no-response"
	case Responded:
		return "responded"
	}
	return "unknown"
}

// Attempt is what a classifier sees of one finished attempt.
type Attempt struct {
	Request   *http.Request  // the request as the caller made it
	Response  *http.Response // nil when Err is set; its body must not be read
	Err       error          // the transport's error, nil when a response arrived
	Number    int            // 1 for the first attempt
	Processed Processed
}

// Decision is a classifier's verdict on one attempt.
type Decision struct {
	// Retry asks for another attempt; the engine may still refuse it
	// (attempts, budget, body, time) and then reports its own stop reason.
	Retry bool
	// Stop is why the operation ends when Retry is false.
	Stop StopReason
	// Cause names what made the attempt retryable, when Retry is true:
	// "status", "rate-limited", "timeout", "connection", "protocol",
	// "error", "key-in-flight" (Rules), "stream" (CodexStream) or "auth"
	// (engine's RefreshAuth). It labels metrics:
	// a custom classifier should keep to a few fixed values.
	Cause string
}

// Retry returns a Decision to retry for cause.
func Retry(cause string) Decision { return Decision{Retry: true, Cause: cause} }

// Stop returns a Decision to stop for reason.
func Stop(reason StopReason) Decision { return Decision{Stop: reason} }
