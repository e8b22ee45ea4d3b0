// Package protocol is the one home of the header names the client and
// server halves of retrystack share, so that the two halves cannot drift
// apart. The exported names of the public packages are these values.
package protocol

import (
	"net/http"
	"strconv"
	"time"
)

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

// AttemptValue is the attempt header's value on attempt n of at most
// max: "2; max=3". Package crosslayer reads it (Position).
func AttemptValue(n, max int) string {
	return strconv.Itoa(n) + "; max=" + strconv.Itoa(max)
}

// TimeLeft is the timeout header's value for a send that begins now,
// under deadline dl. It is rounded up: the service's deadline never ends
// before its caller's, so the caller sees its own deadline, not the
// service's answer to a deadline a moment earlier.
func TimeLeft(dl time.Time) string {
	return strconv.FormatInt(max((time.Until(dl)+time.Millisecond-1).Milliseconds(), 0), 10)
}

// Restamp updates, in r's own header, the time left under header name (a
// retry layer's timeout header, "" for none) when r is sent later than
// its attempt began (a hedge, or after a Prepare): as gRPC sets
// grpc-timeout at send time.
func Restamp(r *http.Request, name string) {
	if name == "" || len(r.Header[name]) == 0 {
		return
	}
	if dl, ok := r.Context().Deadline(); ok {
		r.Header[name] = []string{TimeLeft(dl)}
	}
}

// The events the library's layers emit on an operation
// (middleware.Operation.Emit), and their attributes: the names telemetry
// knows them by, without importing the layers.
const (
	EventRetry     = "retrystack.retry.backoff"        // the retry layer: a retry is planned (AttrDelay, AttrDelaySource, AttrReason, AttrLayer)
	EventPitfall   = "retrystack.pitfall"              // the retry layer: a pitfall fired (AttrPitfall, AttrCookies)
	EventDiscarded = "retrystack.response.discarded"   // the retry layer: a response thrown away for a retry (http.response.status_code)
	EventRefusal   = "retrystack.refusal"              // the retry layer: a layer below refused to send (AttrStopReason)
	EventHedge     = "retrystack.hedge"                // the hedge layer: a hedge was sent (AttrHedge)
	EventBreaker   = "retrystack.breaker.state_change" // the breaker layer: a circuit changed state (AttrBreakerKey, AttrBreakerFrom, AttrBreakerTo)
	EventThrottle  = "retrystack.throttle"             // the throttle layer refused a request (AttrServerAddress, AttrServerPort, AttrThrottleProbability)
	EventPacing    = "retrystack.pacing"               // the retry layer waited for a host's rate limit to reset, or stopped (AttrServerAddress, AttrServerPort, AttrPacingOutcome, AttrDelay)
	EventLimit     = "retrystack.limit"                // the limit layer refused a request (AttrLimitKey, AttrLimit, AttrLimitWaited)
	EventChaos     = "retrystack.chaos"                // the chaos layer injected a fault (AttrChaosInjected, AttrChaosFault)
	EventGiveUp    = "retrystack.give_up"              // the retry layer or engine.Do: the operation ended without success (AttrStopReason, AttrLayer)

	AttrDelay       = "retrystack.retry.delay"     // planned wait, in seconds
	AttrDelaySource = "retrystack.retry.source"    // "policy" or "retry-after"
	AttrReason      = "retrystack.retry.reason"    // Decision.Cause
	AttrLayer       = "retrystack.layer"           // Config.Layer of the retry layer
	AttrPitfall     = "retrystack.pitfall.name"    // the pitfall's name
	AttrCookies     = "retrystack.pitfall.cookies" // cookie-lost: names, never values
	AttrStopReason  = "retrystack.stop_reason"     // policy.StopReason
	AttrHedge       = "retrystack.hedge"           // the hedge's number, from 1

	AttrServerAddress       = "server.address"                  // the request's host alone, as on the attempt spans (wire.ServerAddress)
	AttrServerPort          = "server.port"                     // its port, the scheme's default included
	AttrThrottleProbability = "retrystack.throttle.probability" // its probability of refusing, then
	AttrPacingOutcome       = "retrystack.pacing.outcome"       // "waited" or "stopped"
	AttrLimitKey            = "retrystack.limit.key"            // the key (by default the host) whose limit refused a request
	AttrLimit               = "retrystack.limit.limit"          // the key's limit, then
	AttrLimitWaited         = "retrystack.limit.waited"         // how long the request waited for room, in seconds
	AttrChaosInjected       = "retrystack.chaos.injected"       // always true: the failure was injected, not real
	AttrChaosFault          = "retrystack.chaos.fault"          // the fault's kind: latency, status, refuse, reset, cut-body, stall-body
	AttrChaosDelay          = "retrystack.chaos.delay"          // a latency fault's wait, in seconds
	AttrChaosAfter          = "retrystack.chaos.after"          // a body fault's bytes let through first
	AttrBreakerKey          = "retrystack.breaker.key"          // the circuit: its key (by default the host)
	AttrBreakerFrom         = "retrystack.breaker.from"         // the state it left
	AttrBreakerTo           = "retrystack.breaker.to"           // the state it entered
)

// CauseKeyInFlight is the retry cause of a keyed request the server is
// still processing (409 from the idempotency protocol): the engine asks
// again within the deadline, outside MaxAttempts and the budget.
const CauseKeyInFlight = "key-in-flight"
