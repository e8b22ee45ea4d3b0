// Package ratelimit is a client-side rate limiter written as a user of
// retrystack would write one, with the public API only: proof that a
// layer from outside the library joins an operation the way the
// library's own layers do.
//
// Placed below the retry layer, it:
//
//   - reads the attempt in flight (middleware.Operation.Attempt): a first
//     attempt waits for a token, within its deadline; a retry does not
//     wait, since a retry that queues behind new work only adds to a
//     storm;
//   - reads the deadline (the request's context): a wait that cannot end
//     in time is not started;
//   - draws on the retry layer's budget (middleware.Operation.Budget): a
//     retry with no token may borrow one retry's worth from it;
//   - refuses with a stop reason of its own ("rate-limited", through
//     policy.Refusal): the retry layer stops at once, and the refusal is in
//     its report (the stop and the attempt's error), its hooks (OnAttempt,
//     OnGiveUp) and its spans (retrystack.stop_reason);
//   - tells the operation's observers (middleware.Operation.Emit): with
//     telemetry on, each refusal is an event of the operation's span.
package ratelimit

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/time/rate"
)

// StopRateLimited is the stop reason of an operation the limiter refused.
const StopRateLimited policy.StopReason = "rate-limited"

// EventRefused is the operation event of a refusal, with the attempt
// refused and how far away its token was.
const EventRefused = "ratelimit.refused"

// Error is the limiter's refusal: nothing was sent.
type Error struct {
	Attempt int           // the attempt refused
	Wait    time.Duration // how long a token was away
}

func (e *Error) Error() string {
	return "ratelimit: attempt " + strconv.Itoa(e.Attempt) + " refused: the next token is " + e.Wait.String() + " away"
}

// StopReason makes Error a policy.Refusal.
func (e *Error) StopReason() policy.StopReason { return StopRateLimited }

// Layer returns a layer named "ratelimit" that lets at most limit
// requests a second through, in bursts of at most burst, for every stack
// it is in. It belongs below the retry layer (InsertAfter("retry", ...)).
func Layer(limit rate.Limit, burst int) middleware.Layer {
	lim := rate.NewLimiter(limit, burst)
	return middleware.Layer{Name: "ratelimit", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if err := admit(req.Context(), lim); err != nil {
				if req.Body != nil {
					req.Body.Close() // a RoundTripper closes the body, sent or not
				}
				if r, ok := err.(*Error); ok {
					op, _ := middleware.OperationOf(req.Context())
					op.Emit(middleware.Event{Name: EventRefused, Attrs: []attribute.KeyValue{
						attribute.Int("ratelimit.attempt", r.Attempt),
						attribute.Int64("ratelimit.wait_ms", r.Wait.Milliseconds())}})
				}
				return nil, err
			}
			return next.RoundTrip(req)
		})
	}}
}

// admit takes a token for the request ctx belongs to, or refuses it.
func admit(ctx context.Context, lim *rate.Limiter) error {
	op, _ := middleware.OperationOf(ctx)
	attempt := max(op.Attempt(), 1)
	r := lim.Reserve()
	wait := r.Delay()
	if wait == 0 {
		return nil
	}
	if attempt > 1 {
		// A retry does not queue: it borrows from the retry budget, or
		// is refused.
		r.Cancel()
		if b := op.Budget(); b != nil && b.Withdraw() {
			return nil
		}
		return &Error{Attempt: attempt, Wait: wait}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		r.Cancel() // the wait would outlast the deadline: not started
		return &Error{Attempt: attempt, Wait: wait}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}
