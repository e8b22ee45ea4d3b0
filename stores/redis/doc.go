// Package redis keeps in Redis what a fleet of processes must share. It is
// a module of its own, so the library's go.mod carries no Redis client.
//
// [Store] is an idempotency.Store, for a fleet of instances that must
// share their keys: a request claimed by one instance is in flight for
// all, and its response is replayed by any. A claim is a key with a lease
// (PX): an instance that crashes holds its keys no longer than the lease.
// A completed response is kept for the handler's Keep. The Redis server's
// own memory policy bounds the store: configure maxmemory-policy
// volatile-ttl (every key here has a TTL) rather than noeviction, or a
// full server fails the claim (the handler answers 503).
//
// [Fleet] is a retry budget (a policy.Budget) and a set of pacing holds (a
// policy.Pacer) that a fleet's processes share: the fleet's successes pay
// for its retries, whichever process made them, and a Retry-After one
// process is answered holds them all. No request waits on Redis: each
// process counts locally and exchanges its counts in the background; when
// Redis fails it decides alone, as policy.Default's local budget would,
// until Redis answers again. docs/fleet-redis.md says when to share, what
// it costs Redis and what the fleet measured.
package redis
