// Package chaos is a fault-injection layer for tests and experiments:
// added latency, answers with a chosen status and headers, failures before
// and after sending, bodies cut short or stalled. Models: Polly v8's chaos
// strategies (Simmy), Envoy's fault filter, Toxiproxy's toxics.
//
// Each Fault has a Kind, a Rate (the share of the requests in its scope
// that get it) and a scope (hosts, methods, path prefixes, and which
// attempts of an operation: the first, the first k, all). The layer's
// random numbers come from a seeded PCG (Config.Seed): the same requests,
// sent in the same order, get the same faults on every run. A request
// header can ask for faults the Config has (Config.Header, off by
// default), as Envoy's filter allows for tests across services.
//
// Never on by accident: a zero Config, or one whose faults can never
// fire (every Rate 0 and no Header), is a configuration error, as are a
// Rate outside [0, 1] or NaN, a negative latency, a status outside
// 100–599 and a scope that can match nothing (a host in capitals, a
// method in lower case, a path without its leading /): a
// *policy.ConfigError naming the field, from middleware.NewStack.
//
// Never mistaken for a real failure: every injection is the event
// retrystack.chaos on the operation, with the attributes
// retrystack.chaos.injected=true and retrystack.chaos.fault (latency,
// status, refuse, reset, cut-body, stall-body); telemetry makes it an
// event of the operation's span and counts it in the metric
// retrystack.client.chaos.injected; the retry layer above names it in the
// attempt's record (engine.AttemptRecord.Injected, and the report's
// String). Injected errors say "chaos: injected"
// and wrap what a real failure would: a refused dial (the retry layer
// knows nothing was sent, and may resend even a POST), a reset after the
// request was sent (the server has it: a POST's fate is unknown, and only
// an idempotency key makes a resend safe).
//
// The layer is named "chaos" and works in every position of a stack:
// above the retry layer it fails operations, below it attempts (a
// Status fault there is retried as a real 503 would be, and the server
// never sees the first attempt). The lab's chaos/ rows show both.
package chaos
