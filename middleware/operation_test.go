package middleware_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// What a layer below the retry layer reads of the operation, attempt by
// attempt: the attempt, the sends so far, the deadline, the key and the
// budget; outside a stack, nothing.
func TestOperationAsALayerSeesIt(t *testing.T) {
	type seen struct {
		Attempt, Sends int
		Deadline, Key  bool
		Budget         bool
	}
	var got []seen
	probe := middleware.Layer{Name: "probe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, ok := middleware.OperationOf(req.Context())
			if !ok {
				t.Error("no operation inside a stack")
			}
			_, dl := op.Deadline()
			got = append(got, seen{op.Attempt(), op.Sends(), dl, op.IdempotencyKey() != "", op.Budget() != nil})
			return next.RoundTrip(req)
		})
	}}
	calls := 0
	base := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		code := 503
		if calls == 3 {
			code = 200
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	})
	p := policy.Default()
	p.Backoff, p.Timeout, p.IdempotencyKeys = policy.Backoff{}, time.Minute, true
	outer, _ := engine.New(engine.Config{Policy: p})
	inner, _ := engine.New(engine.Config{Policy: policy.Never(), Layer: "inner"})
	innerLayer := inner.Layer()
	innerLayer.Name = "inner-retry"
	st, err := middleware.NewStack(outer.Layer(), innerLayer, probe)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://svc.test/", http.NoBody)
	resp, err := st.Then(base).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The outer retry layer owns the operation: its attempts, not the
	// inner layer's (which allows one each time).
	want := []seen{{1, 0, true, true, true}, {2, 1, true, true, true}, {3, 2, true, true, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if op, ok := middleware.OperationOf(context.Background()); ok || op.Attempt() != 0 || op.Sends() != 0 || op.Budget() != nil || op.IdempotencyKey() != "" {
		t.Error("outside a stack, the zero Operation answers nothing")
	}
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Observe(e middleware.Event) {
	r.mu.Lock()
	r.events = append(r.events, e.Name)
	r.mu.Unlock()
}

// A layer's events reach every observer of the operation, from any
// goroutine; outside a stack, Emit and Observe do nothing.
func TestEvents(t *testing.T) {
	var first, second recorder
	observe := middleware.Layer{Name: "observe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			op.Observe(&first)
			op.Observe(&second)
			return next.RoundTrip(req)
		})
	}}
	emit := middleware.Layer{Name: "emit", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			var wg sync.WaitGroup
			for range 8 { // as a hedge's sends would, at once
				wg.Go(func() { op.Emit(middleware.Event{Name: "x.sent"}) })
			}
			wg.Wait()
			return next.RoundTrip(req)
		})
	}}
	st, _ := middleware.NewStack(observe, emit)
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	resp, err := st.Then(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	})).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(first.events) != 8 || len(second.events) != 8 {
		t.Errorf("observers saw %d and %d events, want 8 each", len(first.events), len(second.events))
	}
	var none middleware.Operation
	none.Observe(&first)
	none.Emit(middleware.Event{Name: "lost"})
	if len(first.events) != 8 {
		t.Error("the zero Operation told an observer")
	}
}
