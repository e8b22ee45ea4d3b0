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
// [Telemetry.Operation] is the outermost layer, [Telemetry.Attempt] sits
// just above the transport, and [Telemetry.Hooks] adds the engine's retries
// and pitfalls as events on the operation's span and as metrics.
// retrystack.Config.Telemetry wires all three.
//
// Attempt spans follow the stable HTTP semantic conventions
// (semconv v1.43.0): http.request.method, server.address, server.port,
// url.full with userinfo and signature query values redacted,
// http.response.status_code, error.type, network.protocol.version and
// http.request.resend_count, which counts retries and redirect hops in one
// sequence. Trace context is injected on every attempt.
//
// Providers and the propagator are injected; with no-op providers the
// layers cost next to nothing.
package telemetry
