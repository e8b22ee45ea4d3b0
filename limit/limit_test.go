package limit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bad values are configuration errors naming the field; a zero Config is
// one too: a limit must be chosen.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   limit.Config
		field string
	}{
		{limit.Config{}, "limit.Config.Limit"},
		{limit.Config{Limit: -1}, "limit.Config.Limit"},
		{limit.Config{Limit: 4, MinLimit: 2}, "limit.Config.MinLimit"},
		{limit.Config{Limit: 4, MaxLimit: 8}, "limit.Config.MaxLimit"},
		{limit.Config{Limit: 4, Adaptive: true, MinLimit: -1}, "limit.Config.MinLimit"},
		{limit.Config{Limit: 4, Adaptive: true, MaxLimit: -1}, "limit.Config.MaxLimit"},
		{limit.Config{Limit: 4, Adaptive: true, MinLimit: 9, MaxLimit: 8}, "limit.Config.MinLimit"},
		{limit.Config{Limit: 10, Adaptive: true, MaxLimit: 8}, "limit.Config.Limit"},
		{limit.Config{Limit: 1, Adaptive: true, MinLimit: 2}, "limit.Config.Limit"},
		{limit.Config{Limit: 1, MaxKeys: -1}, "limit.Config.MaxKeys"},
	} {
		_, err := middleware.NewStack(limit.Layer(tc.cfg))
		ce, ok := errors.AsType[*policy.ConfigError](err)
		if !ok || ce.Field != tc.field {
			t.Errorf("%+v: %v; want a *policy.ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
	for _, cfg := range []limit.Config{{Limit: 1}, {Limit: 4, Adaptive: true}, {Limit: 4, Adaptive: true, MinLimit: 4, MaxLimit: 4}, {Limit: 1, MaxWait: -1}} {
		if _, err := middleware.NewStack(limit.Layer(cfg)); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// gate is a base transport that holds each request until the test lets
// it go, and tells the test when one arrives.
type gate struct {
	arrived chan *http.Request
	release chan struct{}
	sent    atomic.Int32
}

func newGate() *gate {
	return &gate{arrived: make(chan *http.Request, 64), release: make(chan struct{}, 64)}
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	g.sent.Add(1)
	g.arrived <- req
	select {
	case <-g.release:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

func get(ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// At most Limit requests per host are in flight, against a real server;
// another host has a limit of its own.
func TestBulkheadPerHost(t *testing.T) {
	var in, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := in.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		// Hold a moment, so that others try to pass the limit meanwhile:
		// it only widens the window a broken limit would show in; no
		// verdict rests on it.
		select {
		case <-time.After(2 * time.Millisecond):
		case <-r.Context().Done():
		}
		in.Add(-1)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	rt := limit.Layer(limit.Config{Limit: 4}).Wrap(tr)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if _, err := get(context.Background(), rt, srv.URL); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 4 || m < 1 {
		t.Errorf("the server held %d requests at once; want at most 4", m)
	}
}

// The limit holds exactly: with the base holding every request, a fifth
// waits until one of four returns; a request to another host passes.
func TestLimitIsExact(t *testing.T) {
	g := newGate()
	rt := limit.Layer(limit.Config{Limit: 4}).Wrap(g)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { get(context.Background(), rt, "http://a.example/") })
	}
	for range 4 {
		<-g.arrived
	}
	wg.Go(func() { get(context.Background(), rt, "http://b.example/") })
	if r := <-g.arrived; r.URL.Host != "b.example" {
		t.Fatalf("a fifth request to a.example was sent past the limit")
	}
	g.release <- struct{}{} // one returns: the fifth goes
	r := <-g.arrived
	for range 5 {
		g.release <- struct{}{}
	}
	wg.Wait()
	if r.URL.Host != "a.example" || g.sent.Load() != 6 {
		t.Fatalf("sent %d, last to %s", g.sent.Load(), r.URL.Host)
	}
}

// Config.Key names the limit a request counts against.
func TestKey(t *testing.T) {
	g := newGate()
	rt := limit.Layer(limit.Config{Limit: 1, MaxWait: -1, Key: func(r *http.Request) string { return r.Header.Get("Tenant") }}).Wrap(g)
	send := func(tenant string) error {
		req, _ := http.NewRequest("GET", "http://a.example/", nil)
		req.Header.Set("Tenant", tenant)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	done := make(chan error, 2)
	go func() { done <- send("a") }()
	<-g.arrived
	if err := send("a"); err == nil {
		t.Fatal("a second request of tenant a passed its limit of 1")
	}
	go func() { done <- send("b") }()
	<-g.arrived // tenant b has a limit of its own
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A request that waits until its deadline is refused with the limit's
// own stop, nothing sent, whichever clock fires first; a caller's
// cancellation ends its wait as a cancellation.
func TestRefusedAtDeadline(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		g := newGate()
		e, err := engine.New(engine.Config{Policy: policy.Default()})
		if err != nil {
			t.Fatal(err)
		}
		var events []middleware.Event
		var mu sync.Mutex
		s, err := middleware.NewStack(e.Layer(), observe(func(ev middleware.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }), limit.Layer(limit.Config{Limit: 1}))
		if err != nil {
			t.Fatal(err)
		}
		rt := s.Then(g)
		done := make(chan struct{})
		go func() { defer close(done); get(context.Background(), rt, "http://a.example/holder") }()
		<-g.arrived
		var ctx context.Context
		var stop context.CancelFunc
		if cancel {
			ctx, stop = context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, stop)
		} else {
			ctx, stop = context.WithTimeout(context.Background(), 20*time.Millisecond)
		}
		_, err = get(ctx, rt, "http://a.example/waiter")
		stop()
		rep := engine.ReportFrom(err)
		want := policy.StopConcurrencyLimited
		if cancel {
			want = policy.StopCancelled
		}
		if rep == nil || rep.Stop != want || g.sent.Load() != 1 {
			t.Errorf("cancel=%v: %v, report %+v, %d sent; want stop %s, nothing more sent", cancel, err, rep, g.sent.Load(), want)
		}
		if !cancel && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the refusal does not say the deadline ended its wait: %v", err)
		}
		g.release <- struct{}{}
		<-done
		mu.Lock()
		limited := 0
		for _, ev := range events {
			if ev.Name == middleware.EventLimit {
				limited++
			}
		}
		mu.Unlock()
		if want := map[bool]int{false: 1, true: 0}[cancel]; limited != want {
			t.Errorf("cancel=%v: %d %s events; want %d", cancel, limited, middleware.EventLimit, want)
		}
	}
}

// observe is a layer that observes each operation's events.
func observe(f func(middleware.Event)) middleware.Layer {
	return middleware.Layer{Name: "observe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if op, ok := middleware.OperationOf(req.Context()); ok {
				op.Observe(observerFunc(f))
			}
			return next.RoundTrip(req)
		})
	}}
}

type observerFunc func(middleware.Event)

func (f observerFunc) Observe(e middleware.Event) { f(e) }

// MaxWait bounds the wait; a negative MaxWait refuses at once. A refused
// request's body is closed.
func TestMaxWait(t *testing.T) {
	for _, wait := range []time.Duration{-1, 10 * time.Millisecond} {
		g := newGate()
		rt := limit.Layer(limit.Config{Limit: 1, MaxWait: wait}).Wrap(g)
		done := make(chan struct{})
		go func() { defer close(done); get(context.Background(), rt, "http://a.example/") }()
		<-g.arrived
		body := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest("POST", "http://a.example/", body)
		_, err := rt.RoundTrip(req)
		r, ok := errors.AsType[policy.Refusal](err)
		if !ok || r.StopReason() != policy.StopConcurrencyLimited || body.closed.Load() != 1 || g.sent.Load() != 1 {
			t.Errorf("MaxWait %v: %v, body closed %d, sent %d", wait, err, body.closed.Load(), g.sent.Load())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("MaxWait %v: a refusal by MaxWait says the deadline passed: %v", wait, err)
		}
		g.release <- struct{}{}
		<-done
	}
}

type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// A panic below gives the place back: the next request passes.
func TestPanicBelowReleases(t *testing.T) {
	boom := true
	rt := limit.Layer(limit.Config{Limit: 1, MaxWait: -1}).Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if boom {
			panic("below")
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	}))
	func() {
		defer func() {
			if recover() != "below" {
				t.Error("the panic did not reach the caller")
			}
		}()
		get(context.Background(), rt, "http://a.example/")
	}()
	boom = false
	if _, err := get(context.Background(), rt, "http://a.example/"); err != nil {
		t.Fatalf("the place was not given back: %v", err)
	}
}

// A request that finds room and nobody waiting allocates nothing in the
// layer.
func TestAcceptPathAllocatesNothing(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		resp := &http.Response{StatusCode: 200, Body: http.NoBody}
		rt := limit.Layer(limit.Config{Limit: 4, Adaptive: adaptive}).Wrap(middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil }))
		req, _ := http.NewRequest("GET", "http://api.example.com/", nil)
		resp.Request = req
		rt.RoundTrip(req) // the key is made once
		if n := testing.AllocsPerRun(1000, func() { rt.RoundTrip(req) }); n != 0 {
			t.Errorf("adaptive=%v: %v allocations per accepted request; want 0", adaptive, n)
		}
	}
}

func BenchmarkAccept(b *testing.B) {
	for _, mode := range []string{"fixed", "adaptive"} {
		b.Run(mode, func(b *testing.B) {
			resp := &http.Response{StatusCode: 200, Body: http.NoBody}
			rt := limit.Layer(limit.Config{Limit: 64, Adaptive: mode == "adaptive"}).Wrap(middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil }))
			req, _ := http.NewRequest("GET", "http://api.example.com/", nil)
			resp.Request = req
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rt.RoundTrip(req)
				}
			})
		})
	}
}
