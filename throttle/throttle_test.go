package throttle_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// clock is a test clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// answering is a base transport that answers each request with the
// status next returns.
func answering(next func() int) middleware.RoundTripperFunc {
	return func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: next(), Body: http.NoBody, Request: req}, nil
	}
}

func get(t *testing.T, rt http.RoundTripper) error {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://api.example.com/x", nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// The refusal probability is the SRE book's, from the window before each
// request, K = 2.
func TestFormula(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	draw := 0.999 // refuses only when the probability is above it
	status := 503
	var sent int
	rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return draw }}).Wrap(answering(func() int { sent++; return status }))
	// 10 rejections: requests 10, accepts 0; the 11th meets 10/11.
	for range 10 {
		if err := get(t, rt); err != nil {
			t.Fatalf("refused while p < %v: %v", draw, err)
		}
		c.add(time.Second)
	}
	draw = 10.0/11 - 1e-9
	err := get(t, rt)
	if r, ok := errors.AsType[policy.Refusal](err); !ok || r.StopReason() != policy.StopThrottled || sent != 10 {
		t.Fatalf("the 11th request at p = 10/11: %v (%d sent); want a throttled refusal, nothing sent", err, sent)
	}
	// The refusal counted as a request: 11 requests, 0 accepts.
	draw = 11.0/12 + 1e-9
	if err := get(t, rt); err != nil {
		t.Fatalf("p = 11/12 drawn above: %v", err)
	}
	// 12 requests; accepts now: with 6 accepts of 18, p = (18 - 12)/19.
	status = 200
	for range 6 {
		draw = 0.9999
		get(t, rt)
	}
	draw = 6.0/19 - 1e-9
	if err := get(t, rt); err == nil {
		t.Error("p = 6/19 drawn below: not refused")
	}
	// Half accepted or more: never refused.
	draw = 0.9999
	for range 40 {
		get(t, rt)
	}
	draw = 0
	if err := get(t, rt); err != nil {
		t.Errorf("a host that accepts most: %v", err)
	}
}

// The window forgets: two minutes after the rejections, nothing is
// refused.
func TestWindow(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0 }}).Wrap(answering(func() int { return 503 }))
	for range 9 {
		get(t, rt)
	}
	if err := get(t, rt); err != nil {
		t.Fatalf("refused with 9 requests in the window, under the 10 it takes: %v", err)
	}
	if get(t, rt) == nil {
		t.Fatal("not refused after 10 rejections at draw 0")
	}
	c.add(2*time.Minute + time.Second)
	if err := get(t, rt); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

// Any clock: the zero time, before 1970, after 2262, one that goes back.
func TestAnyClock(t *testing.T) {
	for _, start := range []time.Time{{}, time.Unix(-1e10, 0), time.Unix(1<<40, 0), time.Unix(0, 0)} {
		c := &clock{now: start}
		rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0.5 }}).Wrap(answering(func() int { return 503 }))
		for i := range 50 {
			get(t, rt)
			if i%7 == 0 {
				c.add(-3 * time.Minute)
			} else {
				c.add(10 * time.Second)
			}
		}
	}
}

// Retries are shed first: while the probability is above 0, a retry is
// refused whatever the draw; a first attempt only by the draw.
func TestRetriesShedFirst(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	var sent atomic.Int32
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	e, _ := engine.New(engine.Config{Policy: p})
	st, err := middleware.NewStack(e.Layer(), throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0.999 }}))
	if err != nil {
		t.Fatal(err)
	}
	rt := st.Then(answering(func() int { sent.Add(1); return 503 }))
	// A host that has rejected its 10 requests: a first attempt passes
	// (draw 0.999 is above p), its retry (p > 0) is refused.
	for sent.Load() < 10 {
		req, _ := http.NewRequest("GET", "http://api.example.com/x", nil)
		rt.RoundTrip(req)
	}
	before := sent.Load()
	req, _ := http.NewRequest("GET", "http://api.example.com/x", nil)
	_, err = rt.RoundTrip(req)
	rep := engine.ReportFrom(err)
	if rep == nil || rep.Stop != policy.StopThrottled || len(rep.Attempts) != 2 || sent.Load() != before+1 {
		t.Fatalf("%v, %v (%d sent); want the retry refused, stop throttled, one sent", err, rep, sent.Load()-before)
	}
}

// The refusal reaches the caller through the retry layer: nothing sent,
// the body closed, the event emitted.
func TestRefusalThroughTheStack(t *testing.T) {
	var events []middleware.Event
	var mu sync.Mutex
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	quick := policy.Default()
	quick.Backoff = policy.Backoff{}
	e, _ := engine.New(engine.Config{Policy: quick})
	st, _ := middleware.NewStack(e.Layer(), middleware.Layer{Name: "watch", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			op.Observe(observer(func(ev middleware.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }))
			return next.RoundTrip(req)
		})
	}}, throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0 }}))
	var sent atomic.Int32
	rt := st.Then(answering(func() int { sent.Add(1); return 429 }))
	for sent.Load() < 10 { // 429s, until the window holds 10
		req, _ := http.NewRequest("GET", "http://api.example.com/x", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	body := &rttest.Body{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("PUT", "http://API.example.com:80/x", body)
	before := sent.Load()
	_, err := rt.RoundTrip(req)
	if rep := engine.ReportFrom(err); rep == nil || rep.Stop != policy.StopThrottled || sent.Load() != before || !body.Closed() {
		t.Fatalf("%v: want throttled (the same host), nothing sent, the body closed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, ev := range events {
		if ev.Name == middleware.EventThrottle {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event among %v", middleware.EventThrottle, events)
	}
}

type observer func(middleware.Event)

func (o observer) Observe(e middleware.Event) { o(e) }

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []throttle.Config{{K: 0.5}, {K: math.NaN()}, {K: math.Inf(1)}, {Window: -1}, {Window: time.Millisecond}, {MaxHosts: -1}} {
		if _, err := middleware.NewStack(throttle.Layer(cfg)); err == nil {
			t.Errorf("%+v: no error", cfg)
		} else if _, ok := errors.AsType[*policy.ConfigError](err); !ok {
			t.Errorf("%+v: %v, want a *policy.ConfigError", cfg, err)
		}
	}
}

// Memory is bounded: past MaxHosts, hosts are forgotten, and every host
// still gets an answer.
func TestMaxHosts(t *testing.T) {
	rt := throttle.Layer(throttle.Config{MaxHosts: 4}).Wrap(answering(func() int { return 200 }))
	for i := range 100 {
		req, _ := http.NewRequest("GET", "http://h"+string(rune('a'+i%26))+".example/", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
}

// net/http's RoundTripper contract, with a real transport.
func TestContract(t *testing.T) {
	rttest.Contract(t, throttle.Layer(throttle.Config{}).Wrap)
}

// Over a real server that rejects 90 % of what it gets, with the default
// retry layer above: the server gets fewer than 0.5 requests per
// operation started (the lab's overload/throttle-sheds-locally).
func TestShedsUnderRejection(t *testing.T) {
	var n, seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if n.Add(1)%10 != 0 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	e, _ := engine.New(engine.Config{Policy: p})
	st, _ := middleware.NewStack(e.Layer(), throttle.Layer(throttle.Config{Now: c.Now}))
	rt := st.Then(http.DefaultTransport)
	const ops = 1000
	for range ops {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.add(10 * time.Millisecond)
	}
	if share := float64(seen.Load()) / ops; share >= 0.5 {
		t.Errorf("the server got %.2f requests per operation, want under 0.5", share)
	}
}

// BenchmarkAccept is the accept path: a host that accepts, no refusal.
// It allocates nothing. "clock" reads the wall clock once per request, as
// the layer does by default; "layer" gives it a clock that costs nothing,
// which leaves the layer's own work (docs/benchmarks.md: time.Now alone
// costs 59 ns on a VM whose clock source is kvm-clock).
func BenchmarkAccept(b *testing.B) {
	b.Run("clock", func(b *testing.B) { benchAccept(b, nil) })
	at := time.Unix(1_800_000_000, 0)
	b.Run("layer", func(b *testing.B) { benchAccept(b, func() time.Time { return at }) })
}

func benchAccept(b *testing.B, now func() time.Time) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	rt := throttle.Layer(throttle.Config{Now: now}).Wrap(middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil }))
	req, _ := http.NewRequest("GET", "https://api.example.com/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		rt.RoundTrip(req)
	}
}

// A burst to a healthy host the client has not called before: nothing is
// refused (requests in flight do not count as rejections).
func TestBurstToAHealthyHost(t *testing.T) {
	release := make(chan struct{})
	var sent atomic.Int32
	rt := throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}).Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sent.Add(1)
		<-release
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	}))
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 20 {
		wg.Go(func() {
			if err := get(t, rt); err != nil {
				refused.Add(1)
			}
		})
	}
	for sent.Load()+refused.Load() < 20 {
		time.Sleep(time.Millisecond) // until every request is in flight or refused
	}
	close(release)
	wg.Wait()
	if refused.Load() != 0 {
		t.Errorf("%d of 20 refused", refused.Load())
	}
}

// An answer that comes a window after its request started counts for
// nothing, and never empties the bucket of the period now.
func TestLateAnswer(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	release := make(chan struct{})
	first := true
	var mu sync.Mutex
	rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0 }}).Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		slow := first
		first = false
		mu.Unlock()
		if slow {
			<-release
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
		}
		return &http.Response{StatusCode: 503, Body: http.NoBody, Request: req}, nil
	}))
	done := make(chan error, 1)
	go func() { done <- get(t, rt) }()
	for {
		mu.Lock()
		f := first
		mu.Unlock()
		if !f {
			break
		}
		time.Sleep(time.Millisecond) // until the slow request is in flight
	}
	c.add(2 * time.Minute) // its bucket (period mod 12) comes round again, for the period now
	for range 10 {
		get(t, rt)
	}
	close(release) // its accept is too old: dropped, not a reset of the bucket
	<-done
	if get(t, rt) == nil {
		t.Error("the late answer emptied the window: 10 rejections not refused")
	}
}

// A host that rejected 90 % of requests for minutes, then recovered, is
// accepted again within one window of its recovery under continuous
// traffic: the client's own refusals, counted as requests while the host
// rejects, must not keep the probability up once it accepts what it is
// sent.
func TestRecoversWithinAWindow(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	var n int
	healthy := false
	rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { n++; return float64(n%100) / 100 }}).
		Wrap(answering(func() int {
			n++
			if healthy || n%10 == 0 {
				return 200
			}
			return 503
		}))
	for range 5 * 60 * 10 { // 5 minutes at 10 requests a second
		get(t, rt)
		c.add(100 * time.Millisecond)
	}
	refused := 0
	for range 10 {
		if get(t, rt) != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the host rejecting 90 %: ten requests in a row sent, none refused")
	}
	healthy = true
	recovered := c.Now()
	lastRefusal := recovered
	for range 4 * 60 * 10 {
		if get(t, rt) != nil {
			lastRefusal = c.Now()
		}
		c.add(100 * time.Millisecond)
	}
	t.Logf("last refusal %v after the recovery", lastRefusal.Sub(recovered))
	if d := lastRefusal.Sub(recovered); d > 2*time.Minute {
		t.Errorf("the last refusal came %v after the host recovered; want within the window (2m0s)", d)
	}
}

// A clock that jumps back or forward by hours changes no decision for
// longer than the window: a host that rejects everything is throttled
// again within a window of the jump.
func TestClockJumps(t *testing.T) {
	for _, jump := range []time.Duration{-time.Hour, time.Hour} {
		c := &clock{now: time.Unix(1_800_000_000, 0)}
		var sent int
		rt := throttle.Layer(throttle.Config{Now: c.Now, Rand: func() float64 { return 0.5 }}).
			Wrap(answering(func() int { sent++; return 503 }))
		run := func(d time.Duration) int { // at 10 requests a second; how many were sent
			before := sent
			for range int(d / (100 * time.Millisecond)) {
				get(t, rt)
				c.add(100 * time.Millisecond)
			}
			return sent - before
		}
		run(130 * time.Second) // a full window of rejections
		c.add(jump)
		run(2 * time.Minute) // a window after the jump
		if n := run(time.Minute); n > 60 {
			t.Errorf("jump %v: a window after it, %d of 600 requests sent to a host that rejects everything", jump, n)
		}
	}
}
