// Package crosslayer makes retries happen at one layer of a chain of
// services instead of at every layer.
//
// Without it, a client that retries 3 times, calling a gateway that
// retries 3 times, calling a service that retries 3 times, turns one
// request into 27 at the bottom. The protocol has three headers; the retry
// layer (package engine) speaks the client half, [Handler] the service
// half:
//
//   - Retrystack-Attempt: "2; max=3" on each retry (the first attempt
//     carries none, as with gRPC's grpc-previous-rpc-attempts): where the
//     request sits in its caller's retries.
//   - Retrystack-Timeout-Ms: the milliseconds left before the caller's
//     deadline, when it has one, rounded up (so the caller's deadline ends
//     first and it sees its own error). Handler makes it the inbound
//     request's deadline, capped by a maximum and never later than the
//     one the request already had.
//   - Retrystack-Should-Retry: "false" on a response: do not retry it. A
//     service whose retry layer gave up after retrying (attempts or budget
//     exhausted, a wait past the deadline) or was itself told not to retry
//     sends it with its 5xx or 429, Retry-After kept; a retry layer that
//     receives it stops with the reason "pushback". So only the layer just
//     above the failure retries.
//
// A retry layer speaks it only with the hosts [Signals].To names (none by
// default: a third party gets none of the headers and cannot stop
// retries with one); Signals also renames the headers. docs/cross-layer.md
// describes the protocol, its limits, and what peers that do not speak it
// see.
package crosslayer
