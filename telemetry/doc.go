// Package telemetry makes every retry visible in OpenTelemetry: one INTERNAL
// span per logical operation and one CLIENT span per physical attempt, so
// a retry storm shows up in Jaeger as one tree per call:
//
//	[caller span]
//	└─ "retrystack GET"  INTERNAL   one per logical operation (outermost)
//	   ├─ "GET" CLIENT 503  error.type=503
//	   ├─ "GET" CLIENT 302  http.request.resend_count=1
//	   └─ "GET" CLIENT 200  http.request.resend_count=2
//
// [Telemetry.Operation] is the outermost layer, and observes each
// operation: every event of its layers (retries, pitfalls, give-ups,
// hedges, a breaker's changes) becomes an event of the operation's span,
// and some are counted in metrics. [Telemetry.Attempt] sits just above the
// transport. retrystack.Config.Telemetry wires both. [Telemetry.Observer]
// does the same for engine.Do, which runs outside any stack.
//
// Attempt spans follow the stable HTTP semantic conventions
// (semconv v1.43.0): http.request.method (_OTHER for unknown methods, with
// http.request.method_original), server.address, server.port, url.full
// with userinfo and signature query values redacted, and
// http.request.resend_count, which counts retries and redirect hops in one
// sequence, all given at creation; then network.peer.*,
// http.response.status_code, network.protocol.version and error.type.
// Both spans end when the caller is done with the body and record a body
// that fails; a caller's cancellation is never an error. Trace context is
// injected on every attempt. docs/telemetry.md lists every attribute,
// event and metric.
//
// Providers and the propagator are injected; with no-op providers the
// layers cost next to nothing.
package telemetry
