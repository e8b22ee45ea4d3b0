// Package breaker is a circuit-breaker layer: retries handle the
// occasional failure, a breaker the persistent one. Without it, backoff
// only stretches the avalanche: every caller keeps sending to a service
// that cannot answer.
//
// Each key (the request's host by default) has a circuit:
//
//   - closed: requests pass; a run of Consecutive failures, or a failure
//     rate of at least Rate over the last Window with at least MinCalls
//     calls, opens it;
//   - open: requests fail at once with an *OpenError, sending nothing, for
//     OpenFor (plus up to Jitter of it, so callers do not return together);
//   - half-open: up to Probes requests pass at once; Probes successes close
//     the circuit, one failure opens it again.
//
// A failure is a transport error or a 5xx response; a 4xx is the caller's
// problem, and a cancellation is never the service's. A deadline that
// ends a request counts as a failure, whoever set it (Config.Failure). The layer
// is named "breaker" and can sit outside the retry layer (it then counts
// operations) or inside it (it counts attempts, and the retry layer stops
// with the reason circuit-open): the lab's breaker/ rows compare the two.
package breaker
