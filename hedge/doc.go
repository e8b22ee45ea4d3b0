// Package hedge is a hedging layer: when a request has not been answered
// after a delay, it sends the same request again, and the first response
// wins. It cuts the slow tail of latency (a request stuck behind a slow
// replica, a lost packet) for a bounded amount of extra load.
//
// It hedges only what may be sent twice: idempotent or keyed requests
// (policy.Idempotent, or Config.Safe) whose body can be replayed. Every
// loser is cancelled, its response body closed and its connection
// released before RoundTrip returns: no goroutine outlives the request.
// Placed inside a retry layer (its default place, as in the lab's hedge/
// rows), each hedge withdraws from the retry layer's budget, so hedging
// cannot double a storm, and the retry layer's report counts the hedges of
// each attempt (engine.AttemptRecord.Hedges); an attempt span below marks
// a hedge with retrystack.hedge.
package hedge
