package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// chainRows retry along a chain of services, the caller above S1 → S2 →
// S3, each service calling the next through a client of its own built
// like the row's (the same preset and stack): the 3×3×3 = 27 problem, and
// retrying at one layer instead. server_requests lists what S1, S2 and S3
// counted.
var chainRows = []scenario{
	{
		id:     "chain/naive-3-layers",
		setup:  "caller → S1 → S2 → S3; the caller's, S1's and S2's clients retry every 503 three times, no cross-layer signals, no budget; S3 always 503; one GET",
		preset: "reqwest-for-host", tune: tune(retry503, noBudget), engine: signalsOff,
		run:  func(t *trial) { t.chain(chainSpec{}) },
		want: expect{"3,9,27", "503", "attempts-exhausted", "-"},
	},
	{
		id:     "chain/one-layer-retries",
		setup:  "the same chain with policy.Default() in every client, each speaking the cross-layer protocol with the chain's host (Signals.To: 127.0.0.1), and crosslayer.Handler on S1, S2, S3: only S2 retries, S1 and the caller get \"do not retry\"",
		preset: "default", engine: signalsToChain,
		run:  func(t *trial) { t.chain(chainSpec{inbound: true}) },
		want: expect{"1,1,3", "503", "pushback|non-retryable|attempts-exhausted", "-"},
	},
	{
		id:     "chain/deadline-propagated",
		alone:  true,
		setup:  "the same; the caller's deadline is 1 s, S3 takes 400 ms and then answers 503; the time left travels with each request. bottom_after_deadline: S3's requests started after the caller's deadline",
		preset: "default", tune: fixedRand(0.5), engine: signalsToChain,
		run: func(t *trial) {
			t.chain(chainSpec{inbound: true, bottomDelay: 400 * time.Millisecond, deadline: time.Second})
		},
		want: expect{"-", "error", "deadline", "bottom_after_deadline=0"},
	},
	{
		id:     "chain/storm",
		alone:  true,
		setup:  "the same, S3 always 503; 1000 GETs from the caller, 50 at a time. bottom_per_op: S3's requests per caller GET",
		preset: "default", engine: signalsToChain,
		run:  func(t *trial) { t.chain(chainSpec{inbound: true, ops: 1000, parallel: 50}) },
		want: expect{"-", "503", "-", "bottom_per_op_under=1.3"},
	},
}

// rateLimitRows treat a spent rate limit as a hint, like Retry-After.
var rateLimitRows = []scenario{
	{
		id:     "ratelimit/remaining-0-reset-far",
		setup:  "policy.Default() with Timeout 10 s; 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset 60 s ahead (GitHub's primary rate limit), no Retry-After",
		preset: "default", tune: func(p *policy.Policy) { p.Timeout = 10 * time.Second },
		run: func(t *trial) {
			t.recordElapsed = true
			t.send("GET", "/s/403?ratelimit-reset-in=60s", "")
		},
		want: expect{"1", "403", "wait-exceeds-budget", "elapsed_ms_under=1000"},
	},
	{
		id:     "ratelimit/ratelimit-header",
		setup:  `policy.Default(); 429 with RateLimit: "default";r=0;t=1 (the IETF fields), no Retry-After, then 200`,
		preset: "default",
		run:    get("/fail/1/429?header=" + url.QueryEscape(`RateLimit:"default";r=0;t=1`)),
		want:   expect{"2", "200", "success", "planned_waits_ms=1000"},
	},
}

// routeRows give each endpoint its policy in one place.
var routeRows = []scenario{
	{
		id:     "routes/per-endpoint",
		setup:  "one client, engine.Config.Routes: /payments/ never retried, /search/ 3 attempts; GET /payments/s503, then GET /search/s503 (the subject)",
		preset: "default",
		engine: func(_ *trial, cfg *engine.Config) {
			payments := policy.Never()
			payments.Name = "payments"
			search := cfg.Policy
			search.Name = "search"
			cfg.Routes = []engine.Route{{Name: "payments", PathPrefix: "/payments/", Policy: payments}, {Name: "search", PathPrefix: "/search/", Policy: search}}
		},
		run: func(t *trial) {
			t.send("GET", "/payments/s503", "")
			t.send("GET", "/search/s503", "")
			t.subject = 1
		},
		want: expect{"1,3", "503", "attempts-exhausted", "-"},
	},
}

func signalsOff(_ *trial, cfg *engine.Config) { cfg.Signals.Off = true }

// signalsToChain names the chain's host (every service listens on
// 127.0.0.1): the one line a chain of services turns the protocol on with.
func signalsToChain(_ *trial, cfg *engine.Config) {
	cfg.Signals.To = &policy.Scope{Hosts: []string{"127.0.0.1"}}
}

// chainSpec is how a chain row's services behave and how it is called.
type chainSpec struct {
	inbound     bool          // crosslayer.Handler on every service
	bottomDelay time.Duration // S3 waits this long (or until its deadline) before its 503
	deadline    time.Duration // the caller's; 0: none
	ops         int           // caller GETs; 0: one
	parallel    int           // of them at once; 0: one
}

// chain runs spec's chain and records, as the trial's operations, the
// caller's last result with the requests S1, S2 and S3 counted.
func (t *trial) chain(spec chainSpec) {
	var counts [3]atomic.Int64
	var mu sync.Mutex
	var bottomStarts []time.Time
	wrap := func(h http.Handler) http.Handler {
		if spec.inbound {
			return crosslayer.Handler(h, crosslayer.Config{})
		}
		return h
	}
	s3 := httptest.NewServer(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counts[2].Add(1)
		mu.Lock()
		bottomStarts = append(bottomStarts, time.Now())
		mu.Unlock()
		if spec.bottomDelay > 0 {
			timer := time.NewTimer(spec.bottomDelay)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	// Closed S1 first: Close waits for the requests in flight, so the
	// counts are complete once all three are closed.
	closers := []func(){s3.Close}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closers = nil
	}
	defer func() { closeAll() }()
	next := s3.URL
	for i := 1; i >= 0; i-- { // S2, then S1
		c, err := t.newClient()
		if err != nil {
			t.fail(err)
			return
		}
		srv := httptest.NewServer(wrap(forward(&counts[i], c, next)))
		closers = append(closers, c.CloseIdleConnections, srv.Close)
		next = srv.URL
	}

	ops, parallel := max(spec.ops, 1), max(spec.parallel, 1)
	ctx := t.ctx
	var deadline time.Time
	if spec.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.deadline)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, parallel)
		last     op
		lastOnce sync.Mutex
	)
	for range ops {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, _, rep, err := t.requestURL(ctx, next)
			o := op{report: rep, result: strconv.Itoa(status)}
			if err != nil {
				o.result = "error"
			}
			lastOnce.Lock()
			last = o
			lastOnce.Unlock()
		}()
	}
	wg.Wait()
	closeAll()

	last.requests = int(counts[0].Load())
	t.ops = []op{last, {requests: int(counts[1].Load())}, {requests: int(counts[2].Load())}}
	t.subject = 0
	if spec.deadline > 0 {
		late := 0
		mu.Lock()
		defer mu.Unlock()
		for _, at := range bottomStarts {
			if at.After(deadline) {
				late++
			}
		}
		t.extra["bottom_after_deadline"] = strconv.Itoa(late)
	}
	if spec.ops > 1 {
		t.extra["bottom_per_op"] = fmt.Sprintf("%.2f", float64(counts[2].Load())/float64(ops))
	}
}

// forward is a service that answers each request by calling next with
// client under the request's context, and passes the answer's status,
// Retry-After and body back; a failed call is a 502.
func forward(count *atomic.Int64, client *http.Client, next string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if v := resp.Header.Get("Retry-After"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
}
