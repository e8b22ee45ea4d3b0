package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/examples/ratelimit"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
)

// budget is a retry budget that counts withdrawals and grants as many as
// it holds.
type budget struct{ left, withdrawn atomic.Int32 }

func (b *budget) Deposit() {}
func (b *budget) Withdraw() bool {
	b.withdrawn.Add(1)
	return b.left.Add(-1) >= 0
}

// failOnce answers 503 to its first request and 200 afterwards.
func failOnce() (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})), &n
}

// limited is a client over cfg's stack with the limiter below the retry
// layer: one request an hour, the first at once.
func limited(t *testing.T, cfg retrystack.Config) *http.Client {
	t.Helper()
	stack, err := retrystack.NewStack(cfg)
	if err == nil {
		stack, err = stack.InsertAfter("retry", ratelimit.Layer(rate.Every(time.Hour), 1))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return retrystack.Client(stack, tr)
}

// A layer written outside the library, on its public API, joins the
// operation as the library's own layers do: it reads the attempt, draws
// on the retry budget, refuses with its own stop reason, and the refusal
// is in the report, the hooks and the spans.
func TestALayerOfTheUsersJoinsTheOperation(t *testing.T) {
	srv, served := failOnce()
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := trace.NewTracerProvider(trace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	b := new(budget) // nothing to lend: the retry is refused
	b.left.Store(1)  // the retry layer's own withdrawal for the retry
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, b

	var gaveUp *engine.Report
	var refusedAttempt error
	client := limited(t, retrystack.Config{Policy: &p, Telemetry: tel, Hooks: engine.Hooks{
		OnAttempt: func(ev engine.Event) {
			if ev.Attempt.Err != nil {
				refusedAttempt = ev.Attempt.Err
			}
		},
		OnGiveUp: func(r *engine.Report) { gaveUp = r },
	}})
	_, err = client.Get(srv.URL)

	// It read the attempt: the retry, attempt 2, found no token.
	var refusal *ratelimit.Error
	if !errors.As(err, &refusal) || refusal.Attempt != 2 {
		t.Fatalf("error %v: want the limiter's refusal of attempt 2", err)
	}
	// It drew on the budget: the retry layer's withdrawal, then its own.
	if n := b.withdrawn.Load(); n != 2 {
		t.Errorf("%d withdrawals from the retry budget, want 2 (the retry's, the limiter's loan)", n)
	}
	if n := served.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1: the retry was refused before it was sent", n)
	}
	// The report.
	rep := engine.ReportFrom(err)
	if rep == nil || rep.Stop != ratelimit.StopRateLimited || len(rep.Attempts) != 2 {
		t.Errorf("report %+v, want stop rate-limited after 2 attempts", rep)
	}
	// The hooks.
	if gaveUp == nil || gaveUp.Stop != ratelimit.StopRateLimited || !errors.As(refusedAttempt, &refusal) {
		t.Errorf("hooks: OnGiveUp %+v, OnAttempt's error %v", gaveUp, refusedAttempt)
	}
	// The spans: the stop reason, and the layer's own event.
	var stop string
	events := 0
	for _, s := range rec.Ended() {
		if s.SpanKind() == oteltrace.SpanKindInternal {
			for _, a := range s.Attributes() {
				if a.Key == telemetry.AttrStopReason {
					stop = a.Value.AsString()
				}
			}
			for _, e := range s.Events() {
				if e.Name == ratelimit.EventRefused {
					events++
				}
			}
		}
	}
	if stop != string(ratelimit.StopRateLimited) || events != 1 {
		t.Errorf("operation span stop_reason %q with %d refusal events, want rate-limited and 1", stop, events)
	}
}

// With the budget able to lend, the retry borrows one retry's worth and
// is sent.
func TestARetryBorrowsFromTheBudget(t *testing.T) {
	srv, served := failOnce()
	defer srv.Close()
	b := new(budget)
	b.left.Store(2)
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, b
	client := limited(t, retrystack.Config{Policy: &p})
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || served.Load() != 2 || b.withdrawn.Load() != 2 {
		t.Errorf("status %d, %d served, %d withdrawals; want 200, 2, 2", resp.StatusCode, served.Load(), b.withdrawn.Load())
	}
}

// A first attempt whose wait for a token would outlast its deadline is
// refused at once, not left to time out.
func TestAWaitPastTheDeadlineIsNotStarted(t *testing.T) {
	srv, served := failOnce()
	defer srv.Close()
	client := limited(t, retrystack.Config{})
	if resp, err := client.Get(srv.URL); err == nil { // the one token
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	_, err := client.Do(req)
	var refusal *ratelimit.Error
	if !errors.As(err, &refusal) || refusal.Attempt != 1 || refusal.Wait < time.Minute {
		t.Errorf("%v: want attempt 1 refused, its token more than the minute left away", err)
	}
	if rep := engine.ReportFrom(err); rep == nil || rep.Stop != ratelimit.StopRateLimited {
		t.Errorf("report %+v", rep)
	}
	if served.Load() != 2 {
		t.Errorf("%d served, want 2: the first GET's 503 and its retry (on a loan from the budget)", served.Load())
	}
}

// Below the retry layer, the limiter refuses a retry that has no token
// and nothing to borrow; the caller learns why.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	stack, _ := retrystack.NewStack(retrystack.Config{Policy: &p})
	stack, _ = stack.InsertAfter("retry", ratelimit.Layer(rate.Every(time.Hour), 1))
	fmt.Println(stack)
	_, err := retrystack.Client(stack, nil).Get(srv.URL)
	fmt.Println(engine.ReportFrom(err).Stop)
	// Output:
	// redirect → cookies → retry → ratelimit → transport
	// rate-limited
}
