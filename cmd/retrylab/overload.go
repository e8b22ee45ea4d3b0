package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/overload"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// The metastable-failure experiment, compressed: a service of 150 workers
// of 150 ms each (1 000 requests a second) under an open load of 600
// operations a second from one client; a trigger of 1 s at 40 % capacity;
// attempts time out after 500 ms. (At a fifth of the rate the retry
// budget's fixed reserve, 10 retries a second, is a larger share of the
// load and slows the default's recovery: docs/benchmarks.md.)
var metastable = overload.Experiment{
	Rate: 600, Warmup: 300 * time.Millisecond, Trigger: time.Second, TriggerCapacity: 0.4,
	Grace: 500 * time.Millisecond,
}

const (
	workers     = 150
	serviceTime = 150 * time.Millisecond
	attemptTime = 500 * time.Millisecond
)

// overloadRows show that retries can keep an overloaded service down, and
// that retrystack's bounded retries and its throttle do not.
var overloadRows = []scenario{
	{
		id:     "overload/metastable-naive",
		alone:  true,
		setup:  "an in-process service of fixed capacity (150 workers of 150 ms; it finishes work whose caller gave up) under an open load at 60 % of it (600 operations a second, one client); a trigger drops capacity to 40 % for 1 s; the clients time out after 500 ms and retry 4 times at once, no budget. goodput_after_pct: the share of operations that succeed in the 3 s after the trigger ends",
		preset: "none",
		run: func(t *trial) {
			svc := overload.NewService(workers, serviceTime)
			defer svc.Close()
			e := metastable
			e.After = 3 * time.Second
			r := e.Run(overload.Naive(svc, attemptTime, 4), svc)
			t.extra["goodput_after_pct"] = fmt.Sprintf("%.0f", r.GoodputAfter*100)
			t.extra["wasted_pct"] = fmt.Sprintf("%.0f", r.Wasted*100)
		},
		want: expect{"-", "-", "-", "goodput_after_pct_under=20"},
	},
	{
		id:     "overload/metastable-default",
		alone:  true,
		setup:  "the same with retrystack's defaults in the clients (the retry layer, policy.Default() with AttemptTimeout 500 ms). recovered_ms: from the trigger's end until 90 % of operations succeed again, for good",
		preset: "default", tune: func(p *policy.Policy) { p.AttemptTimeout = attemptTime },
		run: func(t *trial) {
			svc := overload.NewService(workers, serviceTime)
			defer svc.Close()
			rt, err := t.over(svc)
			if err != nil {
				panic(err)
			}
			e := metastable
			e.After = 2 * time.Second
			r := e.Run(rt, svc)
			t.extra["recovered_ms"] = "never"
			if r.Recovered >= 0 {
				t.extra["recovered_ms"] = strconv.FormatInt(r.Recovered.Milliseconds(), 10)
			}
			t.extra["wasted_pct"] = fmt.Sprintf("%.0f", r.Wasted*100)
		},
		want: expect{"-", "-", "-", "recovered_ms_under=1500"},
	},
	{
		id:     "overload/throttle-sheds-locally",
		alone:  true,
		setup:  "adaptive client-side throttling (package throttle, K = 2) inside the default retry layer; a service that answers 90 % of requests 503 for 10 s (a clock the row moves 10 ms per operation); 1000 GETs, 50 at a time. server_share: the requests the service received per operation started",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "throttle"},
		tune: func(p *policy.Policy) { p.Backoff = policy.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond} },
		throttle: func(t *trial) throttle.Config {
			return throttle.Config{Now: t.clock.now}
		},
		run: func(t *trial) {
			var n atomic.Int64
			svc := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				status := http.StatusServiceUnavailable
				if n.Add(1)%10 == 0 {
					status = http.StatusOK
				}
				return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
			})
			rt, err := t.over(svc)
			if err != nil {
				panic(err)
			}
			const ops = 1000
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					for next.Add(1) <= ops {
						t.clock.add(10 * time.Millisecond)
						req, _ := http.NewRequestWithContext(t.ctx, http.MethodGet, "http://service.test/", nil)
						if resp, err := rt.RoundTrip(req); err == nil {
							resp.Body.Close()
						}
					}
				})
			}
			wg.Wait()
			t.extra["server_share"] = fmt.Sprintf("%.2f", float64(n.Load())/ops)
		},
		want: expect{"-", "-", "-", "server_share_under=0.5"},
	},
	{
		id:     "ratelimit/pacing-next-request",
		setup:  `policy.Default(); the server answers the first GET 429 with RateLimit: "default";r=0;t=1, then 200; a second GET to the same host starts once the client has the first's 429 (the subject), and waits for the reset instead of meeting a 429 (policy.RetryAfter.Pace). early_requests: requests the server received while the limit was spent, the first aside`,
		preset: "default",
		hooks:  func(t *trial) engine.Hooks { return engine.Hooks{OnRetry: func(engine.Event) { t.signal() }} },
		run: func(t *trial) {
			var mu sync.Mutex
			var reset time.Time
			early, seen := 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				seen++
				switch {
				case seen == 1:
					reset = time.Now().Add(time.Second)
					w.Header().Set("RateLimit", `"default";r=0;t=1`)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				case time.Now().Before(reset):
					early++
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			first := make(chan op, 1)
			started := make(chan struct{})
			go func() {
				close(started)
				first <- t.measureURL(srv.URL + "/a")
			}()
			<-started
			select { // the second starts once the first's 429 holds the host back: its retry is planned after
			case <-t.signalled:
			case <-t.ctx.Done():
			}
			second := t.measureURL(srv.URL + "/b")
			t.ops = append(t.ops, <-first, second)
			t.subject = 1
			mu.Lock()
			t.extra["early_requests"] = strconv.Itoa(early)
			mu.Unlock()
		},
		want: expect{"2,1", "200", "success", "early_requests=0"},
	},
}

// measureURL sends one GET to rawURL, a server of the row's own, its
// requests counted from its report.
func (t *trial) measureURL(rawURL string) op {
	if _, err := url.Parse(rawURL); err != nil {
		panic(err)
	}
	status, _, rep, err := t.requestTo(t.ctx, http.MethodGet, rawURL, nil)
	o := op{report: rep, result: strconv.Itoa(status)}
	if err != nil {
		o.result = "error"
	}
	if rep != nil {
		o.requests = len(rep.Attempts)
	}
	return o
}
