package breaker_test

import (
	"context"
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

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the injected time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// scripted answers with the next status of its script (the last one
// repeated), or fails with err when the status is 0.
type scripted struct {
	mu     sync.Mutex
	script []int
	calls  int
	err    error
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	code := s.script[min(s.calls, len(s.script)-1)]
	s.calls++
	s.mu.Unlock()
	if code == 0 {
		return nil, s.err
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

func (s *scripted) sent() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

type rig struct {
	clk     *clock
	b       *breaker.Breaker
	rt      http.RoundTripper
	base    *scripted
	changes []string
}

func newRig(t *testing.T, cfg breaker.Config, script ...int) *rig {
	t.Helper()
	r := &rig{clk: &clock{t: time.Unix(1_800_000_000, 0)}, base: &scripted{script: script, err: errors.New("boom")}}
	cfg.Now = r.clk.now
	cfg.Rand = func() float64 { return 0 }
	cfg.OnChange = func(key string, from, to breaker.State) {
		r.changes = append(r.changes, key+" "+from.String()+"→"+to.String())
	}
	b, err := breaker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	r.rt = b.Layer().Wrap(r.base)
	return r
}

func (r *rig) get(t *testing.T, ctx context.Context) (int, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc.test/x", nil)
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Closed → open after the consecutive failures; open fails fast, sending
// nothing; after OpenFor one probe passes; its success closes the circuit.
func TestConsecutiveOpenProbeClose(t *testing.T) {
	r := newRig(t, breaker.Config{Consecutive: 3, OpenFor: time.Second}, 503, 503, 503, 200)
	for range 3 {
		if code, err := r.get(t, context.Background()); code != 503 || err != nil {
			t.Fatalf("closed: %d, %v", code, err)
		}
	}
	_, err := r.get(t, context.Background())
	var open *breaker.OpenError
	if !errors.As(err, &open) || open.Key != "svc.test" || r.base.sent() != 3 {
		t.Fatalf("open: %v, %d sent", err, r.base.sent())
	}
	if r, ok := errors.AsType[policy.Refusal](err); !ok || r.StopReason() != policy.StopCircuitOpen {
		t.Errorf("%v: want a policy.Refusal naming circuit-open", err)
	}
	r.clk.add(time.Second)
	if code, err := r.get(t, context.Background()); code != 200 || err != nil {
		t.Fatalf("probe: %d, %v", code, err)
	}
	if r.b.State("svc.test") != breaker.Closed {
		t.Errorf("after a good probe: %v", r.b.State("svc.test"))
	}
	want := []string{"svc.test closed→open", "svc.test open→half-open", "svc.test half-open→closed"}
	if diff := cmp.Diff(want, r.changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// A failed probe opens the circuit again; while a probe is in flight,
// others fail fast.
func TestFailedProbeReopens(t *testing.T) {
	r := newRig(t, breaker.Config{Consecutive: 1, OpenFor: time.Second}, 503)
	r.get(t, context.Background())
	r.clk.add(time.Second)
	r.get(t, context.Background()) // the probe: 503
	if r.b.State("svc.test") != breaker.Open {
		t.Errorf("after a failed probe: %v", r.b.State("svc.test"))
	}
	if r.base.sent() != 2 {
		t.Errorf("%d sent, want 2", r.base.sent())
	}
}

// What counts: 5xx and transport errors; not 4xx, not the caller's
// cancellation.
func TestWhatCounts(t *testing.T) {
	r := newRig(t, breaker.Config{Consecutive: 2}, 404, 404, 404, 0, 0)
	for range 3 {
		r.get(t, context.Background())
	}
	if r.b.State("svc.test") != breaker.Closed {
		t.Fatalf("4xx opened it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.base.err = context.Canceled
	r.get(t, ctx)
	r.get(t, ctx)
	if r.b.State("svc.test") != breaker.Closed {
		t.Fatalf("the caller's cancellation opened it")
	}
	r.base.err = errors.New("reset")
	r.get(t, context.Background())
	r.get(t, context.Background())
	if r.b.State("svc.test") != breaker.Open {
		t.Errorf("transport errors: %v", r.b.State("svc.test"))
	}
}

// A failure rate over the window, with a minimum number of calls.
func TestFailureRate(t *testing.T) {
	r := newRig(t, breaker.Config{Consecutive: -1, Rate: 0.5, Window: 10 * time.Second, MinCalls: 4}, 503, 200, 503, 200)
	for range 3 {
		r.get(t, context.Background())
	}
	if r.b.State("svc.test") != breaker.Closed {
		t.Fatal("opened before MinCalls")
	}
	r.get(t, context.Background()) // 2 of 4 failed
	if r.b.State("svc.test") != breaker.Open {
		t.Errorf("at 50 %%: %v", r.b.State("svc.test"))
	}

	// Failures older than the window do not count.
	r = newRig(t, breaker.Config{Consecutive: -1, Rate: 0.5, Window: 10 * time.Second, MinCalls: 4}, 503, 503, 200, 200, 200, 200)
	r.get(t, context.Background())
	r.get(t, context.Background())
	r.clk.add(11 * time.Second)
	for range 4 {
		r.get(t, context.Background())
	}
	if r.b.State("svc.test") != breaker.Closed {
		t.Errorf("old failures opened it")
	}
}

// Inside a retry layer the breaker's refusal stops the operation with the
// reason circuit-open; nothing more is sent.
func TestInsideRetry(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	b, _ := breaker.New(breaker.Config{Consecutive: 2, Now: clk.now})
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	p.Budget = nil
	e, _ := engine.New(engine.Config{Policy: p})
	s, err := middleware.NewStack(e.Layer(), b.Layer())
	if err != nil {
		t.Fatal(err)
	}
	base := &scripted{script: []int{503}}
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	_, err = s.Then(base).RoundTrip(req)
	rep := engine.ReportFrom(err)
	if rep == nil || rep.Stop != policy.StopCircuitOpen || base.sent() != 2 {
		t.Errorf("error %v, report %v, %d sent; want circuit-open after 2", err, rep, base.sent())
	}
}

func TestContract(t *testing.T) {
	rttest.Contract(t, breaker.Layer(breaker.Config{Consecutive: 1000}).Wrap)
	// Open: every request fails at once, its body closed.
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Hour})
	rt := b.Layer().Wrap(&scripted{script: []int{503}})
	req, _ := http.NewRequest("POST", "http://svc.test/", strings.NewReader("x"))
	rt.RoundTrip(req)
	body := &closeRecorder{Reader: strings.NewReader("y")}
	req, _ = http.NewRequest("POST", "http://svc.test/", body)
	if _, err := rt.RoundTrip(req); err == nil || !body.closed {
		t.Errorf("open: %v, body closed %v", err, body.closed)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// The closed path allocates nothing of its own.
func TestClosedPathAllocatesNothing(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}
	rt := breaker.Layer(breaker.Config{}).Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp.Request = req
		return resp, nil
	}))
	req := httptest.NewRequest("GET", "http://svc.test/", nil)
	rt.RoundTrip(req) // the circuit is made on first use
	if n := testing.AllocsPerRun(100, func() { rt.RoundTrip(req) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

func TestBadConfig(t *testing.T) {
	nan := math.NaN()
	for _, cfg := range []breaker.Config{{Rate: 2}, {Rate: nan}, {Window: -1}, {Rate: 0.5, Window: 5}, {Probes: -1}, {Jitter: 3}, {Jitter: nan}} {
		if _, err := middleware.NewStack(breaker.Layer(cfg)); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// With Probes 2, two successes close the circuit even when the probes
// overlap; a refusal while both are in flight says the circuit is
// half-open.
func TestSeveralProbes(t *testing.T) {
	r := newRig(t, breaker.Config{Consecutive: 1, OpenFor: time.Second, Probes: 2}, 503, 200)
	r.get(t, context.Background())
	r.clk.add(time.Second)
	if code, err := r.get(t, context.Background()); code != 200 || err != nil || r.b.State("svc.test") != breaker.HalfOpen {
		t.Fatalf("first probe: %d, %v, %v", code, err, r.b.State("svc.test"))
	}
	if code, err := r.get(t, context.Background()); code != 200 || err != nil || r.b.State("svc.test") != breaker.Closed {
		t.Fatalf("second probe: %d, %v, %v", code, err, r.b.State("svc.test"))
	}
}

func TestHalfOpenRefusal(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Now: clk.now})
	var calls atomic.Int32
	rt := b.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		}
		close(entered)
		<-release // the probe stays in flight
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	rt.RoundTrip(req) // opens it
	clk.add(time.Second)
	done := make(chan struct{})
	go func() { rt.RoundTrip(req); close(done) }() // the probe
	<-entered
	_, err := rt.RoundTrip(req)
	var open *breaker.OpenError
	if !errors.As(err, &open) || !open.Until.IsZero() || !strings.Contains(err.Error(), "half-open") {
		t.Errorf("refusal while the probe is in flight: %v", err)
	}
	close(release)
	<-done
}
