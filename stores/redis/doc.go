// Package redis is an idempotency.Store in Redis, for a fleet of instances
// that must share their keys: a request claimed by one instance is in
// flight for all, and its response is replayed by any. It is a module of
// its own, so the library's go.mod carries no Redis client.
//
// A claim is a key with a lease (PX): an instance that crashes holds its
// keys no longer than the lease. A completed response is kept for the
// handler's Keep. The Redis server's own memory policy bounds the store:
// configure maxmemory-policy volatile-ttl (every key here has a TTL) rather
// than noeviction, or a full server fails the claim (the handler answers
// 503).
package redis
