package engine_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

type waitedRefusal struct{ cause error }

func (e waitedRefusal) Error() string                 { return "no room: " + e.cause.Error() }
func (e waitedRefusal) Unwrap() error                 { return e.cause }
func (e waitedRefusal) StopReason() policy.StopReason { return "no-room" }

// A layer below that waits for room until the deadline, then refuses,
// stops the operation with its own reason, whichever deadline it was (the
// caller's, Policy.Timeout, the attempt's) and whether or not its timer
// had fired when the retry layer looked; only the caller's cancellation
// overrules it.
func TestRefusalAtTheDeadlineNamesItsCause(t *testing.T) {
	waitThenRefuse := func(early bool) middleware.RoundTripperFunc {
		return func(req *http.Request) (*http.Response, error) {
			dl, _ := req.Context().Deadline()
			if early { // the deadline has passed, its timer may not have run
				<-time.After(time.Until(dl)) // the deadline's own timer may or may not have run by now
				return nil, waitedRefusal{context.DeadlineExceeded}
			}
			<-req.Context().Done()
			if errors.Is(req.Context().Err(), context.Canceled) {
				return nil, req.Context().Err()
			}
			return nil, waitedRefusal{req.Context().Err()}
		}
	}
	for _, tc := range []struct {
		name  string
		tune  func(*policy.Policy)
		ctx   func() (context.Context, context.CancelFunc)
		early bool
		want  policy.StopReason
	}{
		{"caller-deadline", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, false, "no-room"},
		{"caller-deadline-passed", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, true, "no-room"},
		{"policy-timeout", func(p *policy.Policy) { p.Timeout = 10 * time.Millisecond }, nil, false, "no-room"},
		{"attempt-timeout", func(p *policy.Policy) { p.AttemptTimeout = 10 * time.Millisecond }, nil, false, "no-room"},
		{"cancelled", nil, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, false, policy.StopCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			if tc.tune != nil {
				tc.tune(&p)
			}
			e, err := engine.New(engine.Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://a.example/", nil)
			_, err = e.Layer().Wrap(waitThenRefuse(tc.early)).RoundTrip(req)
			if rep := engine.ReportFrom(err); rep == nil || rep.Stop != tc.want || len(rep.Attempts) != 1 {
				t.Fatalf("%v, report %+v; want stop %s after 1 attempt", err, rep, tc.want)
			}
		})
	}
}
