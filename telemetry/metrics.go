package telemetry

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
)

// instruments are a Telemetry's metrics: otel's HTTP client duration and
// retrystack's own (docs/telemetry.md lists them).
type instruments struct {
	reqDuration httpconv.ClientRequestDuration
	opDuration  metric.Float64Histogram
	resends     metric.Int64Histogram
	delay       metric.Float64Histogram
	retries     metric.Int64Counter
	pitfalls    metric.Int64Counter
	circuits    metric.Int64Counter
	throttled   metric.Int64Counter
	paced       metric.Int64Counter
	limited     metric.Int64Counter
	injected    metric.Int64Counter
}

// newInstruments creates the instruments with m, or returns every error of
// creating one.
func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	var errs []error
	var err error
	in.reqDuration, err = httpconv.NewClientRequestDuration(m)
	errs = append(errs, err)
	in.opDuration, err = m.Float64Histogram("retrystack.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of logical operations: every attempt, wait and redirect hop, and the read of the final body."),
		metric.WithExplicitBucketBoundaries(operationBuckets...))
	errs = append(errs, err)
	in.resends, err = m.Int64Histogram("retrystack.client.operation.resends", metric.WithUnit("{resend}"),
		metric.WithDescription("Sends after the first, per logical operation: retries and redirect hops."),
		metric.WithExplicitBucketBoundaries(resendBuckets...))
	errs = append(errs, err)
	in.delay, err = m.Float64Histogram("retrystack.client.retry.delay", metric.WithUnit("s"),
		metric.WithDescription("Planned wait before each retry."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	errs = append(errs, err)
	in.retries, err = m.Int64Counter("retrystack.client.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries decided, by reason."))
	errs = append(errs, err)
	in.pitfalls, err = m.Int64Counter("retrystack.client.pitfalls", metric.WithUnit("{pitfall}"),
		metric.WithDescription("Retry pitfalls seen, by pitfall."))
	errs = append(errs, err)
	in.circuits, err = m.Int64Counter("retrystack.client.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit-breaker state changes, by circuit and the state entered."))
	errs = append(errs, err)
	in.throttled, err = m.Int64Counter("retrystack.client.throttled", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the throttle refused locally, by host."))
	errs = append(errs, err)
	in.paced, err = m.Int64Counter("retrystack.client.paced", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that waited for a host's rate limit to reset, or stopped because the reset was past their deadline, by host and outcome."))
	errs = append(errs, err)
	in.limited, err = m.Int64Counter("retrystack.client.concurrency_limited", metric.WithUnit("{request}"),
		metric.WithDescription("Requests a concurrency limit refused: no room within their wait, by key."))
	errs = append(errs, err)
	in.injected, err = m.Int64Counter("retrystack.client.chaos.injected", metric.WithUnit("{fault}"),
		metric.WithDescription("Faults the chaos layer injected, by kind: not real failures."))
	errs = append(errs, err)
	return in, errors.Join(errs...)
}

// Bucket boundaries of retrystack's own histograms, in their units
// (docs/telemetry.md lists them): not variables a program could change
// under every Telemetry.
var (
	// operationBuckets (seconds): http.client.request.duration's, then on
	// to a minute, since an operation includes its waits.
	operationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}
	// delayBuckets (seconds): from a millisecond, jitter's floor, to a
	// minute, the default Retry-After cap.
	delayBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// resendBuckets (sends after the first): each small count on its own.
	resendBuckets = []float64{0, 1, 2, 3, 4, 5, 10, 20, 50}
)
