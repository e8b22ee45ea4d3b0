package limit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
	"go.uber.org/goleak"
)

// The limit with the layers it meets, under -race: retry alone (fixed,
// and adaptive below the same bound), a hedge
// above it (each send counts), a breaker and a throttle above it (its
// refusals count for nothing), pacing (a 429's hold, in the retry layer),
// and idempotency keys on POSTs whose first attempt a chaos layer resets
// after sending (the write happens once) × no fault, a caller that
// cancels every operation while some wait for room and some are in
// flight, a layer below that panics × HTTP/1.1 and h2c. In every cell:
// the server never holds more than the limit, each caller gets what it
// would without the limit (an answer, context.Canceled, the panic's own
// value), and nothing is left: the limit's places are all free (as many
// requests as the limit are held at the server at once afterwards), no
// goroutine outlives the cell, no connection stays open.
func TestLimitWithLayers(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		for _, partner := range []string{"retry", "adaptive", "hedge", "breaker", "throttle", "pacing", "keys"} {
			for _, fault := range []string{"none", "cancel", "panic"} {
				if (partner == "pacing" || partner == "keys") && fault == "panic" {
					continue // a panic below is the same cell as retry's
				}
				t.Run(fmt.Sprintf("%s/%s/%s", proto, partner, fault), func(t *testing.T) {
					runLimitCell(t, proto, partner, fault)
				})
			}
		}
	}
}

const (
	cellLimit = 2
	cellOps   = 6
)

// limitServer counts what it holds at once, the most it held, and its
// connections; it holds each request until told (hold) or briefly.
type limitServer struct {
	in, most, seen atomic.Int32
	arrived        chan struct{}
	hold           atomic.Bool // hold every request until its context ends or release
	release        chan struct{}
	paced          atomic.Bool // the first request gets a 429 asking for a short wait

	rttest.Conns // the server's open connections
}

func (s *limitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.in.Add(1)
	defer s.in.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	seen := s.seen.Add(1)
	io.Copy(io.Discard, r.Body)
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	if s.hold.Load() {
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		return
	}
	if s.paced.Load() && seen == 1 {
		w.Header().Set("Retry-After", "0.05")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	// Long enough for others to try to pass the limit; no verdict rests
	// on it.
	select {
	case <-time.After(2 * time.Millisecond):
	case <-r.Context().Done():
	}
	io.WriteString(w, "ok")
}

func runLimitCell(t *testing.T, proto, partner, fault string) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := &limitServer{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	var h http.Handler = srv
	if partner == "keys" {
		h = idempotency.Handler(srv, idempotency.Config{})
	}
	ts, tr := rttest.Server(h, proto == "h2c", &srv.Conns)
	defer ts.Close()

	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	if partner == "pacing" {
		p.RetryAfter.Fractions, p.RetryAfter.Pace = true, true
		srv.paced.Store(true)
	}
	if partner == "keys" {
		p.IdempotencyKeys = true
	}
	e, err := engine.New(engine.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	layers := []middleware.Layer{e.Layer()}
	switch partner {
	case "hedge":
		layers = append(layers, hedge.Layer(hedge.Config{Delay: time.Millisecond}))
	case "breaker":
		layers = append(layers, breaker.Layer(breaker.Config{Consecutive: 1, OnChange: func(string, breaker.State, breaker.State) { changes.Add(1) }}))
	case "throttle":
		layers = append(layers, throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}))
	}
	lc := limit.Config{Limit: cellLimit}
	if partner == "adaptive" { // free to move below the limit, never above it
		lc.Adaptive, lc.MinLimit, lc.MaxLimit = true, 1, cellLimit
	}
	if partner == "breaker" || partner == "throttle" {
		lc.MaxWait = -1 // refusals galore: they must not count against the host
	}
	layers = append(layers, limit.Layer(lc))
	if partner == "keys" {
		layers = append(layers, chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Reset, Rate: 1, Attempts: 1}}}))
	}
	var panics atomic.Bool
	panics.Store(fault == "panic")
	var in, most atomic.Int32 // below the limit: what the client has in flight
	layers = append(layers, middleware.Layer{Name: "below", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			n := in.Add(1)
			defer in.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if panics.Load() && strings.HasSuffix(req.URL.Path, "/0") {
				panic("below the limit")
			}
			return next.RoundTrip(req)
		})
	}})
	s, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: s.Then(tr)}
	defer srv.WaitClosed(t, client.CloseIdleConnections)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if fault == "cancel" {
		srv.hold.Store(true)
	}
	type result struct {
		status    int
		err       error
		recovered any
	}
	results := make([]result, cellOps)
	var wg sync.WaitGroup
	for i := range cellOps {
		wg.Go(func() {
			defer func() { results[i].recovered = recover() }()
			method, body := "GET", io.Reader(nil)
			if partner == "keys" {
				method, body = "POST", strings.NewReader(`{"n":`+fmt.Sprint(i)+`}`)
			}
			req, _ := http.NewRequestWithContext(ctx, method, ts.URL+"/"+fmt.Sprint(i), body)
			resp, err := client.Do(req)
			results[i].err = err
			if err == nil {
				results[i].status = resp.StatusCode
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	if fault == "cancel" {
		for range cellLimit { // the limit's places are held at the server: the others wait, or are on their way
			<-srv.arrived
		}
		cancel()
	}
	wg.Wait()
	srv.hold.Store(false)

	if m := most.Load(); m > cellLimit {
		t.Errorf("%d requests were in flight below the limit at once; the limit is %d", m, cellLimit)
	}
	// The server may still be finishing a send the client abandoned (a
	// hedge that lost, cancelled: over HTTP/1.1 its connection is closed,
	// which the server notices later), so its own count is the limit's
	// only without hedges.
	if m := srv.most.Load(); m > cellLimit && partner != "hedge" {
		t.Errorf("the server held %d requests at once; the limit is %d", m, cellLimit)
	}
	for i, r := range results {
		// A refusal (its stop is cancelled when the caller cancelled as
		// it came).
		_, refused := errors.AsType[policy.Refusal](r.err)
		switch {
		case refused && (partner == "breaker" || partner == "throttle"):
			// Refused at once (MaxWait -1): nothing sent, whatever else
			// the cell does.
		case refused:
			t.Errorf("op %d: refused (%v) by a limit that waits", i, r.err)
		case fault == "panic" && i == 0:
			if r.recovered != "below the limit" {
				t.Errorf("op %d: recovered %v, err %v; want the panic's own value", i, r.recovered, r.err)
			}
		case r.recovered != nil:
			t.Errorf("op %d panicked: %v", i, r.recovered)
		case fault == "cancel":
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("op %d: %d %v; want context.Canceled", i, r.status, r.err)
			}
		default:
			if r.err != nil || r.status != 200 {
				t.Errorf("op %d: %d %v; want 200", i, r.status, r.err)
			}
		}
	}
	if partner == "keys" && fault == "none" {
		// The idempotency handler ran each write once: one per POST, and
		// every retry after the reset was answered from the store.
		if got := srv.seen.Load(); got != cellOps {
			t.Errorf("the handler ran %d times for %d keyed POSTs", got, cellOps)
		}
	}
	if partner == "breaker" && changes.Load() != 0 {
		t.Errorf("the breaker changed state %d times: the limit's refusals counted against the host", changes.Load())
	}

	// Nothing is left: as many requests as the limit are held at the
	// server at once.
	srv.hold.Store(true)
	panics.Store(false)
	var after sync.WaitGroup
	for i := range cellLimit {
		after.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), "GET", ts.URL+"/after"+fmt.Sprint(i), nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			} else {
				t.Errorf("after the cell: %v", err)
			}
		})
	}
	timeout := time.After(10 * time.Second)
	for range cellLimit {
		select {
		case <-srv.arrived:
		case <-timeout:
			t.Fatal("a place of the limit was never given back")
		}
	}
	close(srv.release)
	after.Wait()
}

// A hedge's sends count against the limit: below a hedge, a limit of one
// keeps the hedge from reaching the server while the first send is held
// there.
func TestHedgesCountAgainstTheLimit(t *testing.T) {
	var in, most, seen atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := in.Add(1)
		defer in.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if seen.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	hedged := make(chan struct{}, 4)
	s, err := middleware.NewStack(e.Layer(), observe(func(ev middleware.Event) {
		if ev.Name == middleware.EventHedge {
			hedged <- struct{}{}
		}
	}), hedge.Layer(hedge.Config{Delay: time.Millisecond}), limit.Layer(limit.Config{Limit: 1}))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: s.Then(tr)}
	go func() { <-hedged; close(release) }() // the hedge is on its way: let the first answer
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if m := most.Load(); m != 1 {
		t.Fatalf("the server held %d requests at once under a limit of 1", m)
	}
}

// A limit's refusals say nothing of the host: a throttle and a breaker
// above it count them for nothing.
func TestRefusalsDoNotCountAgainstTheHost(t *testing.T) {
	g := newGate()
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	s, err := middleware.NewStack(e.Layer(),
		breaker.Layer(breaker.Config{Consecutive: 1, OnChange: func(string, breaker.State, breaker.State) { changes.Add(1) }}),
		throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }}),
		limit.Layer(limit.Config{Limit: 1, MaxWait: -1}))
	if err != nil {
		t.Fatal(err)
	}
	rt := s.Then(g)
	done := make(chan struct{})
	go func() { defer close(done); get(context.Background(), rt, "http://a.example/hold") }()
	<-g.arrived
	for range 30 {
		_, err := get(context.Background(), rt, "http://a.example/")
		if rep := engine.ReportFrom(err); rep == nil || rep.Stop != policy.StopConcurrencyLimited {
			t.Fatalf("%v; want the limit's refusal", err)
		}
	}
	g.release <- struct{}{}
	<-done
	g.release <- struct{}{}
	if _, err := get(context.Background(), rt, "http://a.example/"); err != nil || changes.Load() != 0 {
		t.Fatalf("after 30 refusals: %v, %d breaker changes; want an answer, the circuit closed", err, changes.Load())
	}
}
