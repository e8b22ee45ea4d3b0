// Package idempotency is the server half of safe retries for writes: an
// http.Handler middleware for the IETF idempotency protocol
// (draft-ietf-httpapi-idempotency-key-header-07).
//
// A client that retries a POST may send it twice: once when the server
// processed it and the answer was lost, and again as the retry. With an
// Idempotency-Key header (retrystack clients send one with
// policy.Policy.IdempotencyKeys) the server can tell the two apart:
//
//   - the first request with a key runs the handler; its response (status,
//     headers, body) is stored with a fingerprint of the request (method,
//     target, a SHA-256 of the body), then sent: a retry that follows the
//     answer always finds it;
//   - a duplicate with the same fingerprint gets the stored response,
//     marked Idempotent-Replayed: true, and the handler does not run;
//   - a duplicate while the first is still running gets 409 (a retrystack
//     client asks again within its deadline);
//   - the same key with another fingerprint gets 422;
//   - a key that is malformed, or missing where Config.Required asks for
//     one, gets 400.
//
// The handler's answer is stored whatever its status (its effect may have
// happened); a refusal made before it ran (a malformed key, a body too
// large, the store down) is not, so a retry runs the handler. Errors are
// application/problem+json (RFC 9457). Keys are kept for Config.Keep (24 h
// by default), and scoped to a principal with Config.Principal. The first
// request's claim on a key is a lease (Config.Lease), so a crashed
// instance does not hold it forever, and only the claim's holder completes
// or releases it.
//
// The store is the in-memory MemoryStore by default (one instance, tests);
// instances of a fleet share a store of their own: Redis
// (github.com/retrystack/retrystack/stores/redis) or PostgreSQL
// (github.com/retrystack/retrystack/stores/postgres). Every store passes
// the conformance cases of package storetest.
//
// The guarantee and its limit: a duplicate never runs the handler while a
// record exists. A handler that crashes after its effect and before its
// answer is stored leaves no record, and its retry runs again: at-most-
// once effects need the effect and the stored response to commit
// together. The Postgres store does that (the handler writes in the
// store's transaction); with another store, KeyOf gives the handler the
// key to make part of its own write (a unique column in the same
// transaction). See the example and docs/safe-writes.md.
package idempotency
