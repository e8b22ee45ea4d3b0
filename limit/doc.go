// Package limit is a concurrency-limit layer (a bulkhead): per key, the
// request's host by default, at most Limit requests in flight. It limits
// requests, not connections: over HTTP/2 net/http's MaxConnsPerHost
// bounds connections, and one connection carries a hundred streams.
//
// A request beyond the limit waits for room, within its context (its
// deadline, a cancellation) or Config.MaxWait, and is then refused:
// nothing is sent, the request body is closed, and the error is a
// policy.Refusal whose stop reason is "concurrency-limited", so a retry
// layer above stops at once with that reason, even when the wait ended at
// the operation's deadline. A caller's cancellation ends a wait with
// context.Canceled, not a refusal. Each refusal is the event
// retrystack.limit (attributes retrystack.limit.key, retrystack.limit.limit
// and retrystack.limit.waited), which telemetry makes a span event and
// counts in the metric retrystack.client.concurrency_limited.
//
// Retries wait behind first attempts: room that frees goes to the first
// attempt that has waited longest, and to a retry (attempt 2 and on, read
// from middleware.Operation) only when no first attempt waits; a retry
// that finds room with nobody waiting takes it. Under overload the limit
// sheds retries before first attempts, as the throttle does.
//
// A request is in flight from the moment it is let through until the
// layer below returns: its answer's headers, or an error. Reading the
// body is the caller's time, not the limit's (as the breaker and the
// throttle count a result when its headers arrive). A send abandoned (a
// hedge that lost, a caller that gave up) gives its place back as soon
// as the layer below returns, which can be before the server notices:
// over HTTP/1.1 it learns from the closed connection. Below a hedge layer
// every send of the hedge counts: the hedge cannot double the load on a
// host past its limit. A panic below gives the place back.
//
// New returns the limit as a Limiter, which is both the layer (Layer) and
// what an experiment reads: each key's current limit and the requests in
// flight (Limiter.Limit), and the gauge retrystack.client.concurrency_limit
// (Limiter.Instrument).
//
// # Adaptive mode
//
// With Config.Adaptive each key discovers its limit from latency, between
// MinLimit and MaxLimit, with a gradient controller in the style of
// Envoy's adaptive concurrency filter: it compares a sampled minimum
// latency with a smoothed recent latency. Each window of 16 answers and
// timeouts gives a mean latency (a 429 or a 503, which a service that
// sheds load answers fast, other failures and cancellations say nothing
// of a queue, and do not count); the recent latency is their
// exponential average (weight 0.5), the minimum the least window mean.
// At the end of each window
//
//	gradient = clamp(1.25 · minimum / recent, 0.5, 2)
//	limit    = limit · gradient + √(limit · gradient)
//
// so the limit grows while the latency stays within 25 % of the minimum
// and shrinks, by at most half in a window, once a queue forms; the square
// root is headroom, the queue that lets a change be seen. A key that
// uses less than half of its limit is not given more. Every 30 s the
// minimum is measured again, one window with MinLimit in flight, as Envoy
// does: a minimum taken under load, or before the service slowed for
// good, would otherwise hold the limit wrong for ever.
//
// Why this and not Vegas or Netflix's Gradient2: Vegas also estimates the
// queue from the minimum latency, but as an absolute queue length with
// per-sample steps, noisier on the short windows a client sees; Gradient2
// compares a long and a short average, and with both averages following
// a queue that never drains, its limit drifts up under sustained load. A
// minimum measured again at low concurrency is the reference that does
// not drift; the cost is one window every 30 s at MinLimit.
//
// # Placement and memory
//
// The layer is named "limit" and belongs inside the retry layer
// (middleware.Stack.InsertAfter("retry", ...)), where a refusal stops the
// operation with its reason, and below a hedge layer, so that hedges
// count. It keeps at most MaxKeys keys (plus those in use). The accept
// path (room, nobody waiting) allocates nothing; a wait allocates its
// waiter.
package limit
