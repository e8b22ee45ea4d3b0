// Package policy holds the pure decisions of a retry: what to retry
// (classifiers, idempotency, retryable statuses, what the server may already
// have processed), when (backoff built on github.com/sethvargo/go-retry,
// Retry-After hints, per-attempt and total time limits) and how much
// (attempt limits, a [Budget] shared by a client). It does no I/O and never sleeps; package engine carries
// the decisions out.
//
// A [Policy] is a plain struct. Start from a preset — [Default] (ours,
// safe: idempotent or keyed requests, 3 attempts, a budget) or [Never]
// (retries only what the classifier you give it picks) — and change fields:
//
//	p := policy.Default()
//	p.Timeout = 10 * time.Second
//
// A zero Policy is not valid (it has no attempts and no classifier).
// [Policy.Validate] reports invalid values as a [*ConfigError] naming the
// field, the value and the fix, before any request is sent.
//
// Every decision on the success path is allocation-free, and every value here
// is safe for concurrent use once built: a Policy holds no per-operation
// state (each operation gets a fresh backoff from [Backoff.New]).
package policy
