package breaker_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// gate holds each request, named by its X-Name header, until the test
// answers it with a status.
type gate struct {
	mu      sync.Mutex
	answers map[string]chan int
	entered chan string
}

func newGate() *gate { return &gate{answers: map[string]chan int{}, entered: make(chan string, 16)} }

func (g *gate) ch(name string) chan int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.answers[name] == nil {
		g.answers[name] = make(chan int, 1)
	}
	return g.answers[name]
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	name := req.Header.Get("X-Name")
	g.entered <- name
	code := <-g.ch(name)
	return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// send starts the request called name; its result arrives on the channel.
func send(rt http.RoundTripper, name string) chan error {
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://svc.test/", nil)
		req.Header.Set("X-Name", name)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

func isOpen(err error) bool {
	var open *breaker.OpenError
	return errors.As(err, &open)
}

// A probe admitted in one half-open period counts for nothing in the
// next: with Probes 2, A and B pass; A fails and the circuit reopens;
// after OpenFor, C passes; B's late success neither frees a slot of the
// new period nor counts as its success.
func TestStaleProbe(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	g := newGate()
	b, err := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Probes: 2, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	rt := b.Layer().Wrap(g)
	opener := send(rt, "opener")
	<-g.entered
	g.ch("opener") <- 503
	<-opener
	clk.add(time.Second)

	a, bb := send(rt, "A"), send(rt, "B")
	<-g.entered
	<-g.entered
	g.ch("A") <- 503
	<-a
	if s := b.State("svc.test"); s != breaker.Open {
		t.Fatalf("after A failed: %v", s)
	}
	clk.add(time.Second)
	c := send(rt, "C")
	<-g.entered
	g.ch("B") <- 200 // stale: admitted in the previous period
	if err := <-bb; err != nil {
		t.Fatal(err)
	}
	// The new period has one slot left: D takes it, E is refused.
	d := send(rt, "D")
	select {
	case <-g.entered:
	case err := <-d:
		t.Fatalf("D: %v, want a slot (only C holds one)", err)
	}
	e := send(rt, "E")
	select {
	case <-g.entered:
		t.Errorf("E admitted: three requests in flight with 2 probes (B freed a slot of the new period)")
		g.ch("E") <- 200
		<-e
	case err := <-e:
		if !isOpen(err) {
			t.Errorf("E: %v, want refused (C and D hold both slots)", err)
		}
	}
	g.ch("C") <- 200
	<-c
	if s := b.State("svc.test"); s != breaker.HalfOpen {
		t.Errorf("after C alone succeeded: %v, want half-open (B's success is stale)", s)
	}
	g.ch("D") <- 200
	<-d
	if s := b.State("svc.test"); s != breaker.Closed {
		t.Errorf("after C and D succeeded: %v, want closed", s)
	}
}

// A panic below the breaker gives the probe's slot back: the host is
// reached again, and a success closes the circuit.
func TestPanicBelowGivesTheSlotBack(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	script := &scripted{script: []int{503}}
	panicking := true
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Now: clk.now})
	rt := b.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if script.sent() > 0 && panicking {
			panic("a hook below")
		}
		return script.RoundTrip(req)
	}))
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	rt.RoundTrip(req) // 503: open
	clk.add(time.Second)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		rt.RoundTrip(req) // the probe panics
	}()
	panicking = false
	script.script = []int{200}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("after a panicking probe: %v (its slot was kept)", err)
	}
	resp.Body.Close()
	if s := b.State("svc.test"); s != breaker.Closed {
		t.Errorf("state %v, want closed", s)
	}
}

// A panic in OnChange, after the answer came, closes the answer's body
// and leaves the circuit usable.
func TestPanicInOnChange(t *testing.T) {
	body := &closeRecorder{}
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OnChange: func(string, breaker.State, breaker.State) { panic("hook") }})
	rt := b.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: body, Header: http.Header{}, Request: req}, nil
	}))
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	func() {
		defer func() { recover() }()
		rt.RoundTrip(req)
	}()
	if !body.closed {
		t.Error("the answer's body was not closed")
	}
	if _, err := rt.RoundTrip(req); !isOpen(err) {
		t.Errorf("after the panic: %v, want the open circuit's refusal", err)
	}
}

// State changes reach OnChange in the order they happened, even when a
// later change is made while an earlier one is being reported.
func TestChangesInOrder(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	var (
		mu      sync.Mutex
		changes []string
	)
	hold, holding := make(chan struct{}), make(chan struct{})
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Now: clk.now,
		OnChange: func(_ string, from, to breaker.State) {
			if to == breaker.Open && len(changes) == 0 {
				close(holding)
				<-hold // the first report is slow
			}
			mu.Lock()
			changes = append(changes, from.String()+"→"+to.String())
			mu.Unlock()
		}})
	rt := b.Layer().Wrap(&scripted{script: []int{503, 200}})
	first := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("GET", "http://svc.test/", nil)
		rt.RoundTrip(req) // closed→open, reported slowly
		close(first)
	}()
	<-holding
	clk.add(time.Second)
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	resp, err := rt.RoundTrip(req) // open→half-open→closed while the first report waits
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(hold)
	<-first
	want := []string{"closed→open", "open→half-open", "half-open→closed"}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// The default key is the host as a server sees it: case and the scheme's
// default port do not make another circuit.
func TestDefaultKeyIsTheHost(t *testing.T) {
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Hour})
	rt := b.Layer().Wrap(&scripted{script: []int{503}})
	req, _ := http.NewRequest("GET", "https://API.Example.com:443/x", nil)
	rt.RoundTrip(req)
	for _, u := range []string{"https://api.example.com/y", "https://api.example.COM:443/", "HTTPS://api.example.com", "http://api.example.com:80/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := rt.RoundTrip(req); !isOpen(err) {
			t.Errorf("%s: %v, want the open circuit's refusal", u, err)
		}
	}
	for _, u := range []string{"http://api.example.com:443/", "https://api.example.com:8443/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Errorf("%s: %v, want another circuit", u, err)
		}
	}
	if s := b.State("api.example.com"); s != breaker.Open {
		t.Errorf("State(api.example.com) = %v", s)
	}
	// An internationalised name is sent in punycode: one host, one circuit.
	req, _ = http.NewRequest("GET", "http://bücher.example/", nil)
	rt.RoundTrip(req)
	req, _ = http.NewRequest("GET", "http://xn--bcher-kva.example/", nil)
	if _, err := rt.RoundTrip(req); !isOpen(err) {
		t.Errorf("xn--bcher-kva.example after bücher.example failed: %v, want the open circuit's refusal", err)
	}
}

// Clocks and random sources a test can inject, with the values the code
// might not expect: the zero time, a time before 1970 or after 2262, a
// clock that goes back, Rand outside [0, 1), a huge OpenFor.
func TestOddClocksAndConfigs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Time
		step  time.Duration
		rand  float64
		open  time.Duration
	}{
		{"zero time", time.Time{}, time.Second, 0.5, time.Second},
		{"before 1970", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Second, 0.5, time.Second},
		{"after 2262", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), time.Second, 0.5, time.Second},
		{"going back", time.Unix(1_800_000_000, 0), -time.Second, 0.5, time.Second},
		{"Rand 1.5", time.Unix(1_800_000_000, 0), time.Second, 1.5, time.Second},
		{"Rand NaN", time.Unix(1_800_000_000, 0), time.Second, math.NaN(), time.Second},
		{"Rand -1", time.Unix(1_800_000_000, 0), time.Second, -1, time.Second},
		{"huge OpenFor", time.Unix(1_800_000_000, 0), time.Second, 0.999, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: tc.start}
			b, err := breaker.New(breaker.Config{Consecutive: -1, Rate: 0.5, MinCalls: 4, Window: time.Minute,
				OpenFor: tc.open, Now: clk.now, Rand: func() float64 { return tc.rand }})
			if err != nil {
				t.Fatal(err)
			}
			rt := b.Layer().Wrap(&scripted{script: []int{503}})
			req, _ := http.NewRequest("GET", "http://svc.test/", nil)
			for i := range 4 {
				if i > 0 {
					clk.add(tc.step)
				}
				if _, err := rt.RoundTrip(req); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			_, err = rt.RoundTrip(req)
			var open *breaker.OpenError
			if !errors.As(err, &open) {
				t.Fatalf("after 4 failures of 4: %v, want the open circuit's refusal", err)
			}
			if tc.step > 0 && tc.open == time.Second {
				// Open for 1 s plus at most 10 % of it, whatever Rand says.
				if d := open.Until.Sub(clk.now()); d < 0 || d > 1100*time.Millisecond {
					t.Errorf("open for %v more", d)
				}
			}
			if tc.open == math.MaxInt64 && !open.Until.After(clk.now().Add(100*365*24*time.Hour)) {
				t.Errorf("a huge OpenFor wrapped round: open until %v", open.Until)
			}
		})
	}
}

// A caller's cancellation while a probe is in flight gives the slot back.
func TestCancelledProbeGivesTheSlotBack(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Now: clk.now})
	calls := 0
	rt := b.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		switch calls {
		case 1:
			return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		case 2:
			return nil, req.Context().Err()
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	rt.RoundTrip(req)
	clk.add(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.RoundTrip(req.WithContext(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled probe: %v", err)
	}
	if resp, err := rt.RoundTrip(req); err != nil {
		t.Fatalf("next probe: %v", err)
	} else {
		resp.Body.Close()
	}
	if s := b.State("svc.test"); s != breaker.Closed {
		t.Errorf("state %v", s)
	}
}

// An OnChange that panics as the circuit turns half-open, on the
// admission path, gives the probe's place back: the next request is the
// probe and closes the circuit.
func TestPanicInOnChangeAtAdmission(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	var once sync.Once
	b, _ := breaker.New(breaker.Config{Consecutive: 1, OpenFor: time.Second, Jitter: -1, Now: clk.now,
		OnChange: func(_ string, _, to breaker.State) {
			if to == breaker.HalfOpen {
				once.Do(func() { panic("hook") })
			}
		}})
	rt := b.Layer().Wrap(&scripted{script: []int{503, 200}})
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	rt.RoundTrip(req)
	clk.add(time.Second)
	body := &closeRecorder{}
	func() {
		defer func() { recover() }()
		r, _ := http.NewRequest("PUT", "http://svc.test/", body)
		rt.RoundTrip(r) // open → half-open: the hook panics
	}()
	if !body.closed {
		t.Error("the body of the request that panicked was not closed")
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("after the panic: %v (the probe slot was kept)", err)
	}
	resp.Body.Close()
	if s := b.State("svc.test"); s != breaker.Closed {
		t.Errorf("state %v, want closed", s)
	}
}

// A caller's cancellation is never the service's failure, whatever error
// net/http returns for it: with context.WithCancelCause it returns the
// cause, which is not context.Canceled.
func TestCancellationWithACause(t *testing.T) {
	arrived := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, inside := range []bool{false, true} {
		b, _ := breaker.New(breaker.Config{Consecutive: 2})
		e, _ := engine.New(engine.Config{Policy: policy.Default()})
		layers := []middleware.Layer{b.Layer(), e.Layer()}
		if inside {
			layers = []middleware.Layer{e.Layer(), b.Layer()}
		}
		st, _ := middleware.NewStack(layers...)
		rt := st.Then(tr)
		for range 3 {
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() { <-arrived; cancel(errors.New("shutting down")) }()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if _, err := rt.RoundTrip(req); err == nil || isOpen(err) {
				t.Errorf("inside=%v: %v, want the cancellation", inside, err)
			}
		}
		if s := b.State(srv.Listener.Addr().String()); s != breaker.Closed {
			t.Errorf("inside=%v: circuit %v after three cancellations, want closed", inside, s)
		}
	}
}
