package overload

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Service is a service of fixed capacity: Workers workers, each taking
// Service time per request (longer while a trigger takes capacity away,
// as a lower CPU quota does). Requests wait in one FIFO queue. Like the
// MongoDB of the experiment, it finishes the work of a request whose
// caller gave up: that work is wasted. It is an http.RoundTripper, in
// process.
type Service struct {
	service time.Duration
	scale   atomic.Uint64 // math.Float64bits of the capacity fraction
	queue   chan *job
	stop    chan struct{}
	wg      sync.WaitGroup
	instant atomic.Bool // answer at once, uncounted: a warm-up that costs no time

	requests, served, wasted atomic.Int64
}

type job struct {
	ctx     context.Context
	done    chan struct{}
	dropped bool // set before done closes: the service closed
}

// ErrQueueFull is the error of a request the service's queue cannot hold.
var ErrQueueFull = errors.New("overload: the service's queue is full")

// NewService starts a service of workers workers taking service per
// request: its capacity is workers / service requests a second.
func NewService(workers int, service time.Duration) *Service {
	s := &Service{service: service, queue: make(chan *job, 1<<16), stop: make(chan struct{})}
	s.SetCapacity(1)
	for range workers {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

// SetCapacity sets the fraction of its capacity the service has: each
// request takes service/frac. A fraction of 0 or less is a hundredth.
func (s *Service) SetCapacity(frac float64) {
	if !(frac > 0) {
		frac = 0.01
	}
	s.scale.Store(math.Float64bits(frac))
}

// ErrClosed is the error of a request the service dropped as it closed.
var ErrClosed = errors.New("overload: the service closed")

// Close stops the workers; requests still queued or in service are
// dropped, their callers answered ErrClosed.
func (s *Service) Close() {
	close(s.stop)
	s.wg.Wait()
	for {
		select {
		case j := <-s.queue:
			j.dropped = true
			close(j.done)
		default:
			return
		}
	}
}

func (s *Service) work() {
	defer s.wg.Done()
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-s.stop:
			return
		case j := <-s.queue:
			t.Reset(time.Duration(float64(s.service) / math.Float64frombits(s.scale.Load())))
			select {
			case <-t.C:
			case <-s.stop:
				j.dropped = true
				close(j.done)
				return
			}
			if j.ctx.Err() != nil {
				s.wasted.Add(1) // done for a caller that gave up
			} else {
				s.served.Add(1)
			}
			close(j.done)
		}
	}
}

// RoundTrip queues req and answers 200 once a worker has served it, or
// returns the context's error if the caller gives up first (the work
// stays queued).
func (s *Service) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	if s.instant.Load() {
		return ok(req), nil
	}
	s.requests.Add(1)
	j := &job{ctx: req.Context(), done: make(chan struct{})}
	select {
	case s.queue <- j:
	default:
		return nil, ErrQueueFull
	}
	select {
	case <-j.done:
		if j.dropped {
			return nil, ErrClosed
		}
		return ok(req), nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

func ok(req *http.Request) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: req}
}

// Requests is how many requests reached the service; Wasted how many of
// them it served after their caller had given up.
func (s *Service) Requests() int64 { return s.requests.Load() }
func (s *Service) Wasted() int64   { return s.wasted.Load() }

// Naive is the experiment's client: each attempt times out after timeout,
// and a failed one is retried at once, up to retries times, with no
// budget.
func Naive(next http.RoundTripper, timeout time.Duration, retries int) http.RoundTripper {
	return naive{AttemptTimeout(next, timeout), retries}
}

type naive struct {
	next    http.RoundTripper
	retries int
}

func (n naive) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	for range n.retries + 1 {
		var resp *http.Response
		if resp, err = n.next.RoundTrip(req); err == nil || req.Context().Err() != nil {
			return resp, err
		}
	}
	return nil, err
}

// AttemptTimeout gives each request through next a timeout of its own,
// which ends once its body is closed: the experiment's attempt timeout,
// for a client without one.
func AttemptTimeout(next http.RoundTripper, timeout time.Duration) http.RoundTripper {
	return attemptTimeout{next, timeout}
}

type attemptTimeout struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t attemptTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// Experiment is one run: an open-loop load of Rate operations a second,
// each started on time whatever the others do, for Warmup, then Trigger
// with the service at TriggerCapacity, then After. An operation started
// before the end has Grace after it to finish; what has not succeeded by
// then failed.
type Experiment struct {
	Rate                          float64
	Warmup, Trigger, After, Grace time.Duration
	TriggerCapacity               float64
	Bucket                        time.Duration // of the goodput series; 0: 100 ms
	// Credit, before the run, sends the clients Credit's worth of the
	// load back to back, answered at once by a service that counts none
	// of it: their budgets and throttles hold what a client that has run
	// that long holds, earned in no time (compressed time).
	Credit time.Duration
}

// Result is what a run measured.
type Result struct {
	// Goodput is, per Bucket from the start, the share of the operations
	// started in it that succeeded.
	Goodput []float64
	// Before is the share of the operations started in the warm-up that
	// succeeded; GoodputAfter the share of those started after the
	// trigger.
	Before, GoodputAfter float64
	// Recovered is the time from the trigger's end until the goodput is
	// 90 % of Before or more in every bucket after it; negative if it
	// never is.
	Recovered time.Duration
	// PerOperation is the requests the service received per operation
	// started; Wasted the share of them it served for callers that had
	// already given up.
	PerOperation, Wasted float64
	// Incident is the requests the service received per operation from
	// the trigger's start to 5 s after its end (or the run's end).
	Incident float64
}

// IncidentSpan is how long after the trigger's end Result.Incident counts.
const IncidentSpan = 5 * time.Second

// Run runs e: each operation is a GET through client to svc.
func (e Experiment) Run(client http.RoundTripper, svc *Service) Result {
	if e.Bucket == 0 {
		e.Bucket = 100 * time.Millisecond
	}
	total := e.Warmup + e.Trigger + e.After
	ctx, cancel := context.WithCancel(context.Background())
	if e.Credit > 0 {
		svc.instant.Store(true)
		for range int(e.Rate * e.Credit.Seconds()) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://service.test/", nil)
			if resp, err := client.RoundTrip(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		svc.instant.Store(false)
	}
	n := int(e.Rate * total.Seconds())
	type outcome struct {
		at time.Duration
		ok bool
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	start := time.Now()
	triggered, restored, counted := false, false, false
	incidentEnd := e.Warmup + e.Trigger + IncidentSpan
	var atTrigger, atIncidentEnd int64
	for i := range n {
		at := time.Duration(float64(i) / e.Rate * float64(time.Second))
		if d := time.Until(start.Add(at)); d > 0 {
			time.Sleep(d) // the open-loop schedule
		}
		now := time.Since(start)
		if !triggered && now >= e.Warmup {
			atTrigger = svc.Requests()
			svc.SetCapacity(e.TriggerCapacity)
			triggered = true
		}
		if !restored && now >= e.Warmup+e.Trigger {
			svc.SetCapacity(1)
			restored = true
		}
		if !counted && now >= incidentEnd {
			atIncidentEnd = svc.Requests()
			counted = true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://service.test/", nil)
			resp, err := client.RoundTrip(req)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			outcomes[i] = outcome{at: at, ok: ok} // by its place in the schedule: a late start is the load generator's, not the client's
		}()
	}
	if d := time.Until(start.Add(total + e.Grace)); d > 0 {
		time.Sleep(d)
	}
	cancel() // what has not succeeded by now failed
	wg.Wait()
	svc.SetCapacity(1)
	if !counted {
		atIncidentEnd, incidentEnd = svc.Requests(), total
	}

	r := Result{Recovered: -1, PerOperation: float64(svc.Requests()) / float64(max(n, 1))}
	if svc.Requests() > 0 {
		r.Wasted = float64(svc.Wasted()) / float64(svc.Requests())
	}
	buckets := int((total + e.Bucket - 1) / e.Bucket)
	started, ok := make([]int, buckets), make([]int, buckets)
	before, beforeOK, after, afterOK, incident := 0, 0, 0, 0, 0
	for _, o := range outcomes {
		b := int(o.at / e.Bucket)
		started[b]++
		if o.ok {
			ok[b]++
		}
		switch {
		case o.at < e.Warmup:
			before++
			if o.ok {
				beforeOK++
			}
		case o.at >= e.Warmup+e.Trigger:
			after++
			if o.ok {
				afterOK++
			}
		}
		if o.at >= e.Warmup && o.at < incidentEnd {
			incident++
		}
	}
	r.Goodput = make([]float64, buckets)
	for b := range buckets {
		if started[b] > 0 {
			r.Goodput[b] = float64(ok[b]) / float64(started[b])
		}
	}
	r.Before = 1
	if before > 0 {
		r.Before = float64(beforeOK) / float64(before)
	}
	if after > 0 {
		r.GoodputAfter = float64(afterOK) / float64(after)
	}
	if incident > 0 {
		r.Incident = float64(atIncidentEnd-atTrigger) / float64(incident)
	}
	end := int((e.Warmup + e.Trigger) / e.Bucket)
	for b := buckets - 1; b >= end && r.Goodput[b] >= 0.9*r.Before; b-- {
		r.Recovered = time.Duration(b)*e.Bucket - (e.Warmup + e.Trigger)
	}
	return r
}

// Fleet spreads operations over clients in turn, as a load balancer in
// front of a service spreads them over its callers' processes: each
// client carries an even share.
func Fleet(clients []http.RoundTripper) http.RoundTripper {
	return &fleet{clients: clients}
}

type fleet struct {
	clients []http.RoundTripper
	next    atomic.Uint64
}

func (f *fleet) RoundTrip(req *http.Request) (*http.Response, error) {
	return f.clients[(f.next.Add(1)-1)%uint64(len(f.clients))].RoundTrip(req)
}

// Flaky is a healthy service that answers each request at once, 200 or,
// with probability rate (from seed), 503: failures at random, not
// overload.
func Flaky(rate float64, seed uint64) http.RoundTripper {
	return &flaky{rate: rate, rnd: rand.New(rand.NewPCG(seed, seed))}
}

type flaky struct {
	rate     float64
	mu       sync.Mutex
	rnd      *rand.Rand
	requests atomic.Int64
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	f.requests.Add(1)
	f.mu.Lock()
	fail := f.rnd.Float64() < f.rate
	f.mu.Unlock()
	resp := ok(req)
	if fail {
		resp.StatusCode, resp.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
	}
	return resp, nil
}

// Healthy sends warm operations, then ops more, through each of clients:
// the clients side by side, each one's operations one after another, as
// fast as they go (compressed time: a budget that refills with time
// refills less than it would at the real rate). It returns the share of
// the ops operations (warm-up aside) that ended 200.
func Healthy(clients []http.RoundTripper, warm, ops int) float64 {
	var okOps atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for i := range warm + ops {
				req, _ := http.NewRequest(http.MethodGet, "http://service.test/", nil)
				resp, err := c.RoundTrip(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if i >= warm && resp.StatusCode == http.StatusOK {
					okOps.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(okOps.Load()) / float64(max(len(clients)*ops, 1))
}
