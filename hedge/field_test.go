package hedge_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// closeBody records whether it was closed.
type closeBody struct{ closed atomic.Bool }

func (b *closeBody) Read([]byte) (int, error) { return 0, context.Canceled }
func (b *closeBody) Close() error             { b.closed.Store(true); return nil }

// A panic below the hedging layer, on a send's goroutine, reaches the
// caller's goroutine as it would without hedging, after the other sends
// are cancelled and released; the process lives on.
func TestPanicBelowReachesTheCaller(t *testing.T) {
	for _, which := range []string{"original", "hedge"} {
		t.Run(which, func(t *testing.T) {
			var calls atomic.Int32
			hedged := make(chan struct{})
			other := &closeBody{}
			otherCancelled := make(chan struct{})
			rt := hedge.Layer(hedge.Config{Delay: time.Millisecond}).Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				n := calls.Add(1)
				if n == 1 {
					if which == "original" {
						<-hedged // the hedge is in flight when the original panics
						panic("a hook below")
					}
					<-req.Context().Done() // the loser: cancelled, then answers
					close(otherCancelled)
					return &http.Response{StatusCode: 200, Body: other, Header: http.Header{}, Request: req}, nil
				}
				if which == "original" {
					close(hedged)
					<-req.Context().Done()
					close(otherCancelled)
					return &http.Response{StatusCode: 200, Body: other, Header: http.Header{}, Request: req}, nil
				}
				panic("a hook below")
			}))
			req, _ := http.NewRequest("GET", "http://svc.test/", nil)
			var got any
			func() {
				defer func() { got = recover() }()
				rt.RoundTrip(req)
			}()
			if got != "a hook below" {
				t.Fatalf("recovered %v, want the panic's own value", got)
			}
			select {
			case <-otherCancelled:
			default:
				t.Error("the other send was not cancelled before the panic reached the caller")
			}
			if !other.closed.Load() {
				t.Error("the other send's answer was not released")
			}
		})
	}
}

// A hedge tells the server the time left when it is sent, not when its
// attempt began: the retry layer above restamps its copy.
func TestHedgeTellsTheTimeLeftWhenSent(t *testing.T) {
	for _, name := range []string{"", "X-Deadline-Ms"} {
		sig := crosslayer.Signals{Timeout: name, To: &policy.Scope{}}
		_, header, _ := sig.Names()
		var mu sync.Mutex
		var got []int
		var calls atomic.Int32
		e, _ := engine.New(engine.Config{Policy: policy.Default(), Signals: sig})
		st, _ := middleware.NewStack(e.Layer(), hedge.Layer(hedge.Config{Delay: 50 * time.Millisecond}))
		rt := st.Then(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			ms, _ := strconv.Atoi(req.Header.Get(header)) // read while the next hedge's header is written (-race)
			mu.Lock()
			got = append(got, ms)
			mu.Unlock()
			if calls.Add(1) == 1 {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc.test/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		// Timers never fire early: the hedge left at least 50 ms later.
		if len(got) != 2 || got[0] <= 0 || got[1] > got[0]-49 {
			t.Errorf("%s: time left sent %v, want the hedge's at least 49 ms below the original's", header, got)
		}
	}
}

// A panic on the caller's goroutine while a hedge is made (here the
// request's GetBody) cancels and releases the sends in flight before it
// goes on.
func TestPanicWhileHedgingReleasesTheSends(t *testing.T) {
	var cancelled atomic.Bool
	rt := hedge.Layer(hedge.Config{Delay: time.Millisecond, Safe: func(*http.Request) bool { return true }}).Wrap(
		middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			cancelled.Store(true)
			return nil, req.Context().Err()
		}))
	req, _ := http.NewRequest("PUT", "http://svc.test/", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { panic("GetBody") }
	var got any
	func() {
		defer func() { got = recover() }()
		rt.RoundTrip(req)
	}()
	if got != "GetBody" || !cancelled.Load() {
		t.Errorf("recovered %v; original send cancelled and returned: %v", got, cancelled.Load())
	}
}
