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
//     target, a SHA-256 of the body);
//   - a duplicate with the same fingerprint gets the stored response,
//     marked Idempotent-Replayed: true, and the handler does not run;
//   - a duplicate while the first is still running gets 409;
//   - the same key with another fingerprint gets 422;
//   - a request without a key where Config.Required asks for one gets 400.
//
// Errors are application/problem+json (RFC 9457). Keys are kept for
// Config.Keep (24 h by default); the first request's claim on a key is a
// lease (Config.Lease), so a crashed instance does not hold it forever.
//
// The store is the in-memory MemoryStore by default (one instance, tests);
// instances of a fleet share a store of their own, such as the Redis store
// in the module github.com/retrystack/retrystack/stores/redis. Every store
// passes the conformance tests of package storetest.
//
// The guarantee and its limit: a duplicate never runs the handler while a
// record exists. A handler that crashes after its effect and before the
// response is stored leaves no record, and its retry runs again: at-most-
// once effects need the effect and the stored response to commit
// together. KeyOf gives the handler the key, so it can make the key part
// of its own write (a unique column in the same transaction); see the
// example and docs/safe-writes.md.
package idempotency
