// Package breaker is a circuit-breaker layer: retries handle the
// occasional failure, a breaker the persistent one. Without it, backoff
// only stretches the avalanche: every caller keeps sending to a service
// that cannot answer.
//
// Each key has a circuit. The default key is the request's host as a
// server sees it: in lower case, without the scheme's default port. A
// circuit is
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
// problem, and a cancellation is never the service's, nor a refusal by a
// layer below (a concurrency limit: nothing was sent). A deadline that
// ends a request counts as a failure, whoever set it (Config.Failure). The layer
// is named "breaker" and can sit outside the retry layer (it then counts
// operations) or inside it (it counts attempts, and the retry layer stops
// with the reason circuit-open): the lab's breaker/ rows compare the two.
//
// What holds under faults:
//
//   - every admitted request gives its place back on every path: a
//     result, a cancellation, a panic below the layer or in OnChange;
//   - a request counts only in the period (closed, open, half-open) that
//     admitted it: a probe of an earlier half-open period that answers
//     late neither frees a slot of the new one nor closes the circuit;
//   - OnChange sees a circuit's changes in the order they happened;
//   - the breaker keeps at most MaxCircuits circuits (plus those with
//     requests in flight): closed circuits with nothing to remember are
//     forgotten as keys come and go;
//   - any clock works (the zero time, before 1970, after 2262, one that
//     goes back), any Rand value, any OpenFor; a bad Config is an error
//     from New (or NewStack), never a panic.
package breaker
