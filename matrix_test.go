package retrystack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

// The layers of the field together, under -race: the breaker outside and
// inside the retry layer × hedging on and off × a panicking layer below,
// a panicking retry hook, or no fault × the caller cancelling or not ×
// HTTP/1.1 and h2c. Every cell starts with the breaker's circuit half-open,
// so the cell's request is its one probe: a slot kept by any path shows as
// a refused follow-up. Each cell checks what the server saw, what the
// caller got, and that no slot, goroutine or connection is left.
func TestLayersUnderFaults(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		for _, inside := range []bool{false, true} {
			for _, hedged := range []bool{false, true} {
				for _, fault := range []string{"none", "layer-panic", "hook-panic"} {
					for _, cancel := range []bool{false, true} {
						name := fmt.Sprintf("%s/breaker-inside=%v/hedge=%v/%s/cancel=%v", proto, inside, hedged, fault, cancel)
						t.Run(name, func(t *testing.T) {
							runCell(t, cell{proto: proto, inside: inside, hedged: hedged, fault: fault, cancel: cancel})
						})
					}
				}
			}
		}
	}
}

type cell struct {
	proto          string
	inside, hedged bool
	fault          string
	cancel         bool
}

// cellServer stalls the requests it is told to until they are cancelled,
// and answers the others "ok". It counts requests, cancellations and open
// connections.
type cellServer struct {
	stallAll, stallFirst atomic.Bool
	seen, cancelled      atomic.Int32
	arrived, ended       chan struct{}

	rttest.Conns // the server's open connections
}

func (s *cellServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.seen.Add(1)
	io.Copy(io.Discard, r.Body)
	s.arrived <- struct{}{}
	if s.stallAll.Load() || (s.stallFirst.Load() && n == 1) {
		<-r.Context().Done()
		s.cancelled.Add(1)
		s.ended <- struct{}{}
		return
	}
	w.Write([]byte("ok"))
}

func runCell(t *testing.T, c cell) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := &cellServer{arrived: make(chan struct{}, 64), ended: make(chan struct{}, 64)}
	ts, tr := rttest.Server(srv, c.proto == "h2c", &srv.Conns)
	defer ts.Close()

	// The breaker: opened by one answer marked a failure, then half-open.
	now := time.Unix(1_800_000_000, 0)
	var clockMu sync.Mutex
	b, err := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1,
		Now: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now },
		Failure: func(resp *http.Response, err error) bool {
			if err != nil {
				return !errors.Is(err, context.Canceled)
			}
			return resp.Request.Header.Get("X-Opener") != ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	var panicking atomic.Bool
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	e, err := engine.New(engine.Config{Policy: p, Hooks: engine.Hooks{OnAttempt: func(engine.Event) {
		if panicking.Load() && c.fault == "hook-panic" {
			panic("hook")
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	layers := []middleware.Layer{b.Layer(), e.Layer()}
	if c.inside {
		layers = []middleware.Layer{e.Layer(), b.Layer()}
	}
	if c.hedged {
		layers = append(layers, hedge.Layer(hedge.Config{Delay: time.Millisecond, Safe: func(r *http.Request) bool {
			return r.Header.Get("X-No-Hedge") == "" // the opener and the follow-up: one request each
		}}))
	}
	layers = append(layers, middleware.Layer{Name: "below", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if panicking.Load() && c.fault == "layer-panic" {
				panic("layer")
			}
			return next.RoundTrip(req)
		})
	}})
	st, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: st.Then(tr)}
	defer tr.CloseIdleConnections()

	get := func(ctx context.Context, headers ...string) (status int, panicked any, err error) {
		defer func() { panicked = recover() }()
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL, nil)
		for _, h := range headers {
			req.Header.Set(h, "1")
		}
		resp, err := client.Transport.RoundTrip(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			return 0, nil, err
		}
		return resp.StatusCode, nil, nil
	}

	// Open the circuit, and let its open time pass.
	if code, _, err := get(context.Background(), "X-Opener", "X-No-Hedge"); code != 200 || err != nil {
		t.Fatalf("opener: %d, %v", code, err)
	}
	<-srv.arrived
	clockMu.Lock()
	now = now.Add(time.Second)
	clockMu.Unlock()
	srv.seen.Store(0)

	// The cell's request: the circuit's probe.
	wantSeen := int32(1)
	switch {
	case c.fault == "layer-panic":
		wantSeen = 0
	case c.hedged:
		wantSeen = 2 // the original stalls until the hedge wins or the caller gives up
	}
	if c.fault == "layer-panic" && c.cancel {
		wantSeen = 0
	}
	srv.stallFirst.Store(c.hedged)
	srv.stallAll.Store(c.cancel)
	panicking.Store(c.fault != "none")
	ctx, cancelFn := context.WithCancel(context.Background())
	defer cancelFn()
	if c.cancel {
		if wantSeen == 0 {
			cancelFn() // nothing would reach the server: cancelled before the call
		} else {
			go func() {
				for range wantSeen {
					<-srv.arrived
				}
				cancelFn()
			}()
		}
	}
	code, panicked, err := get(ctx)
	panicking.Store(false)

	// What the caller got.
	switch {
	case c.fault == "layer-panic" && c.cancel:
		if panicked != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("caller got %d, %v, panic %v; want context.Canceled before any send", code, err, panicked)
		}
	case c.fault == "layer-panic":
		if panicked != "layer" {
			t.Errorf("caller got %d, %v, panic %v; want the layer's panic", code, err, panicked)
		}
	case c.fault == "hook-panic":
		if panicked != "hook" {
			t.Errorf("caller got %d, %v, panic %v; want the hook's panic", code, err, panicked)
		}
	case c.cancel:
		if panicked != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("caller got %d, %v, panic %v; want context.Canceled", code, err, panicked)
		}
	default:
		if panicked != nil || err != nil || code != 200 {
			t.Errorf("caller got %d, %v, panic %v; want 200", code, err, panicked)
		}
	}
	cancelFn()
	// What the server saw.
	// Stalled requests end when the server sees their cancellation; the
	// deadline only bounds a failure.
	deadline := time.After(10 * time.Second)
	for range stalled(c, wantSeen) {
		select {
		case <-srv.ended:
		case <-deadline:
			t.Fatalf("server: %d of %d stalled requests saw their cancellation", srv.cancelled.Load(), stalled(c, wantSeen))
		}
	}
	if n := srv.seen.Load(); n != wantSeen {
		t.Errorf("server saw %d requests, want %d", n, wantSeen)
	}

	// No slot left: the circuit lets the next request through, and its
	// success closes it.
	srv.stallAll.Store(false)
	srv.stallFirst.Store(false)
	if code, p, err := get(context.Background(), "X-No-Hedge"); code != 200 || err != nil || p != nil {
		t.Errorf("follow-up: %d, %v, panic %v; want 200 (a probe slot was kept)", code, err, p)
	}
	if s := b.State(hostOf(ts.URL)); s != breaker.Closed {
		t.Errorf("circuit %v after the follow-up, want closed", s)
	}
	// No connection left once the client lets its idle ones go.
	srv.WaitClosed(t, tr.CloseIdleConnections)
}

// stalled is how many of the cell's requests the server holds until they
// are cancelled.
func stalled(c cell, seen int32) int32 {
	switch {
	case seen == 0:
		return 0
	case c.cancel:
		return seen
	case c.hedged:
		return 1 // the original, the hedge's loser
	}
	return 0
}

func hostOf(u string) string { return u[len("http://"):] }
