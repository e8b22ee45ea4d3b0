package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

func TestDo(t *testing.T) {
	clk := &clock{t: time.Now()}
	p := policy.Default()
	p.Rand = func() float64 { return 0.5 }
	p.Budget = nil // the loop is the subject; four retries in two operations are more than Default's budget holds
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	e.now, e.sleep = clk.now, clk.sleep

	// A stream that breaks twice (an EOF mid-stream), then delivers.
	var discarded []string
	v, rep, err := Do(context.Background(), e, Op[string]{
		Attempt: func(ctx context.Context, n int) (string, error) {
			if n < 3 {
				return "partial", io.ErrUnexpectedEOF
			}
			return "whole", nil
		},
		Discard: func(v string) { discarded = append(discarded, v) },
	})
	if err != nil || v != "whole" {
		t.Fatalf("Do = %q, %v", v, err)
	}
	if rep.Stop != policy.StopSuccess || len(rep.Attempts) != 3 {
		t.Errorf("report: stop %s, %d attempts", rep.Stop, len(rep.Attempts))
	}
	if diff := cmp.Diff([]time.Duration{50 * ms, 100 * ms}, rep.PlannedWaits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if len(discarded) != 0 {
		t.Errorf("discarded %q: results that came with an error are not the loop's to release", discarded)
	}

	// A custom classifier retries a value, not an error; the loop releases
	// the values it throws away.
	v, rep, err = Do(context.Background(), e, Op[string]{
		Attempt:  func(ctx context.Context, n int) (string, error) { return "stale", nil },
		Classify: func(n int, v string, err error) policy.Decision { return policy.Retry("stale") },
		Discard:  func(v string) { discarded = append(discarded, v) },
	})
	if err != nil || v != "stale" || rep.Stop != policy.StopAttemptsExhausted {
		t.Errorf("Do = %q, %v, stop %s; want the last value, attempts-exhausted", v, err, rep.Stop)
	}
	if diff := cmp.Diff([]string{"stale", "stale"}, discarded); diff != "" {
		t.Errorf("discarded (-want +got):\n%s", diff)
	}

	// Errors the classifier will not retry end the operation with an *Error.
	permanent := errors.New("permanent")
	_, rep, err = Do(context.Background(), e, Op[int]{
		Attempt: func(context.Context, int) (int, error) { return 0, permanent },
	})
	var ee *Error
	if !errors.As(err, &ee) || !errors.Is(err, permanent) || rep.Stop != policy.StopNonRetryable {
		t.Errorf("error %v, stop %s", err, rep.Stop)
	}
}

// The attempt's context ends when Do returns, so nothing started under it
// outlives the operation.
func TestDoEndsAttemptContext(t *testing.T) {
	p := policy.Default()
	p.AttemptTimeout = time.Hour
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	Do(context.Background(), e, Op[int]{Attempt: func(c context.Context, _ int) (int, error) { ctx = c; return 1, nil }})
	if ctx.Err() == nil {
		t.Error("attempt context still live after Do returned")
	}
}

func TestReportString(t *testing.T) {
	r := &Report{Policy: "default", Attempts: []AttemptRecord{{Status: 503}, {Err: errors.New("x")}, {Status: 200}},
		PlannedWaits: []time.Duration{50 * ms, 100 * ms}, Stop: policy.StopSuccess, Pitfalls: []Pitfall{PitfallRetryAfterIgnored}}
	want := "default: 3 attempts [503 error 200], waits [50ms 100ms], success, pitfalls [retry-after-ignored]"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// Whatever the policy, the context of an attempt whose result is discarded
// ends before the next attempt, and the last one's when Do returns.
func TestDoEndsAttemptContextWithoutTimeouts(t *testing.T) {
	p := policy.Default()
	p.Backoff.Base = 1
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	var ctxs []context.Context
	var liveAtNext []bool
	Do(context.Background(), e, Op[int]{
		Attempt: func(c context.Context, n int) (int, error) {
			for _, prev := range ctxs {
				liveAtNext = append(liveAtNext, prev.Err() == nil)
			}
			ctxs = append(ctxs, c)
			if n < 3 {
				return 0, errors.New("transient")
			}
			return n, nil
		},
		Classify: func(n int, _ int, err error) policy.Decision {
			if err != nil {
				return policy.Retry("error")
			}
			return policy.Stop(policy.StopSuccess)
		},
	})
	if len(ctxs) != 3 {
		t.Fatalf("%d attempts", len(ctxs))
	}
	for i, live := range liveAtNext {
		if live {
			t.Errorf("a discarded attempt's context was live at a later attempt (%d)", i)
		}
	}
	if ctxs[2].Err() == nil {
		t.Error("the last attempt's context is still live after Do returned")
	}
}

// eventNames is an observer that keeps the names of the events it is told.
type eventNames []string

func (n *eventNames) Observe(e middleware.Event) { *n = append(*n, e.Name) }

// Do tells its events to the Op's Observer, its Fallback's too when the
// Fallback names none: every retry, and the give-up of each.
func TestDoObserver(t *testing.T) {
	p := policy.Default()
	p.Backoff, p.Budget, p.MaxAttempts = policy.Backoff{}, nil, 2
	e, err := New(Config{Policy: p, Layer: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("broken")
	fail := func(context.Context, int) (int, error) { return 0, broken }
	retry := func(int, int, error) policy.Decision { return policy.Retry("stream") }
	var seen eventNames
	_, rep, err := Do(context.Background(), e, Op[int]{Attempt: fail, Classify: retry, Observer: &seen,
		Fallback: &Op[int]{Attempt: fail, Classify: retry}})
	if !errors.Is(err, broken) || rep.Fallbacks != 1 {
		t.Fatalf("%v, %v", err, rep)
	}
	want := eventNames{protocol.EventRetry, protocol.EventGiveUp, protocol.EventRetry, protocol.EventGiveUp}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// Every send is on the report's line: an attempt's hops, hedges and the
// resends the transport made on its own, a fault injected on purpose, and
// a replayed answer.
func TestReportStringShowsEverySend(t *testing.T) {
	r := &Report{Policy: "default", Attempts: []AttemptRecord{{Status: 503, Transparent: 1, Injected: "status"}, {Status: 201, Redirects: 2, Hedges: 1}},
		PlannedWaits: []time.Duration{0}, Stop: policy.StopSuccess, Replayed: true}
	want := "default: 2 attempts [503 (+1 resent by the transport) (injected: status) 201 (after 2 redirect(s)) (+1 hedge(s))], waits [0s], success (replayed by the server)"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
