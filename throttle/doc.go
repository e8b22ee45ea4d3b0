// Package throttle is adaptive client-side throttling per host, the
// formula of Google's SRE book ("Handling Overload"): a client that sees
// a host reject much of what it sends rejects some of its own requests
// locally, before they cost the host anything.
//
// For each host the layer counts, over the last Window (2 minutes), the
// requests it was asked to send and the accepts: answers that are not an
// overload (429, 503, a refused or reset connection, a timeout are). A
// request counts once it has finished (a burst to a healthy host is not
// judged on answers it has not given yet), and a cancellation counts for
// nothing: it says nothing of the host; nor does a refusal by a layer
// below (a concurrency limit). It refuses a request with
// probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// with K = 2, once the window holds 10 requests (a host the client has
// just started to call is not judged on one or two answers): while a host
// accepts at least half of what it is sent, nothing is refused; as its accepts fall, the client sends it about K
// times what it accepts. A refused request counts as a request while the host
// rejects (in a bucket of the window where it rejected some of what it
// was sent), as the book has it; once it accepts everything it is sent
// again, the client's own refusals stop counting, and the probability
// falls back to 0 within a window of its recovery (the book's formula
// alone takes several windows: each of its refusals counts as a
// rejection).
//
// Retries are shed first, as gRPC's retry throttling does: while the
// probability is above 0, every retry of an operation (its attempt 2 and
// on, read from middleware.Operation) is refused, and first attempts with
// the probability. A refusal sends nothing; it is a policy.Refusal whose
// stop reason is "throttled", so a retry layer above stops at once, and
// the layer emits the event retrystack.throttle (the host and the
// probability), which telemetry counts in retrystack.client.throttled.
//
// The layer is named "throttle" and belongs inside the retry layer
// (middleware.Stack.InsertAfter("retry", ...)), where it sees each
// attempt. Its memory is bounded (MaxHosts), its clock injected (Now),
// and an accepted request allocates nothing.
package throttle
