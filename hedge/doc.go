// Package hedge is a hedging layer: when a request has not been answered
// after a delay, it sends the same request again, and the first response
// wins. It cuts the slow tail of latency (a request stuck behind a slow
// replica, a lost packet) for a bounded amount of extra load.
//
// It hedges only what may be sent twice at once: requests of an
// idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; or what
// Config.Safe picks) whose body can be replayed. Not a keyed POST: a hedge
// of it is a concurrent duplicate by definition, which an idempotency
// server refuses (409) while the first copy runs. Every
// loser is cancelled, its response body closed and its connection
// released before RoundTrip returns: no goroutine outlives the request.
// Placed inside a retry layer (its default place, as in the lab's hedge/
// rows), each hedge withdraws from the retry layer's budget, so hedging
// cannot double a storm, and the retry layer's report counts the hedges of
// each attempt (engine.AttemptRecord.Hedges); an attempt span below marks
// a hedge with retrystack.hedge.
//
// Each hedge is sent with a header of its own, in which the retry layer
// above restamps the time left (the cross-layer Timeout header) for the
// moment the hedge leaves; the original goes with the caller's header,
// which, as net/http's RoundTripper contract says, nothing below may
// change. A panic below the layer happens on a send's goroutine: the
// layer carries it to the caller's goroutine and panics there with the
// same value, after cancelling and releasing every other send, as it would
// without hedging.
package hedge
