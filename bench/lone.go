package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// The lone-client cells (issue 43): one client, alone, against a real
// net/http server on 127.0.0.1 through a real transport, with each rule of
// the frontier and the peers' guarded configurations. A client is built
// as an Overloader is, over its own *http.Transport, each attempt timing
// out after the timeout given (0: none).

// retrystackWith is retrystack over base() with the budget budget makes
// (nil budget: base's own; a budget func that returns nil: none).
func retrystackWith(name string, base func() policy.Policy, budget func() (policy.Budget, error)) Overloader {
	return Overloader{name, func(svc http.RoundTripper, to time.Duration) (http.RoundTripper, error) {
		p := base()
		p.AttemptTimeout = to
		if budget != nil {
			b, err := budget()
			if err != nil {
				return nil, err
			}
			p.Budget = b
		}
		return retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: svc})
	}}
}

// Rules are retrystack with every retry budget of the frontier table, each
// new per client: policy.Default() (a timeout's retry only from the last
// second's successes), policy.Alone() (a timeout's retry from the stock),
// tower's TPS budget (wave 3's default: a reserve of 10 retries a second),
// none, wave 4's earned budget, the review's sketch at 10 s and 20 s, and
// an AWS SDK style retry quota (rules.go has the last four).
var Rules = []Overloader{
	retrystackWith("retrystack", policy.Default, nil),
	retrystackWith("retrystack, Alone()", policy.Alone, nil),
	retrystackWith("retrystack, tower's budget", policy.Default, func() (policy.Budget, error) {
		return policy.NewTPSBudget(10*time.Second, 10, 0.2)
	}),
	retrystackWith("retrystack, no budget", policy.Default, func() (policy.Budget, error) { return nil, nil }),
	retrystackWith("retrystack, wave 4's budget", policy.Default, func() (policy.Budget, error) { return newWave4Budget(), nil }),
	retrystackWith("retrystack, sketch 10 s", policy.Default, func() (policy.Budget, error) { return newSketchBudget(10 * time.Second), nil }),
	retrystackWith("retrystack, sketch 20 s", policy.Default, func() (policy.Budget, error) { return newSketchBudget(20 * time.Second), nil }),
	retrystackWith("retrystack, AWS quota", policy.Default, func() (policy.Budget, error) { return newAWSQuota(), nil }),
}

// LoneConfigs are the clients of the lone cells: the Rules, then
// go-retryablehttp at its defaults, failsafe-go with its retry budget and
// breaker, and retry-go with its retry throttle.
var LoneConfigs = append(slices.Clone(Rules), overloader("go-retryablehttp"), overloader("failsafe-go (budget, breaker)"), overloader("retry-go (throttle)"))

func overloader(name string) Overloader {
	i := slices.IndexFunc(Overloaders, func(o Overloader) bool { return o.Name == name })
	return Overloaders[i]
}

// LoneResult is what a lone cell measured for one configuration.
type LoneResult struct {
	Ops, OK  int // operations, and those that ended 200
	Requests int // requests the server received
	// Attempts are the requests the client sent, counted above any fault
	// injected below it (the chaos cell's; elsewhere Requests).
	Attempts int
	Clients  int    // independent clients the operations were spread over
	Outcome  string // what happened, for the cells of one or two operations
}

// SuccessPct is the share of the operations that ended 200, in per cent.
func (r LoneResult) SuccessPct() float64 { return float64(r.OK) * 100 / float64(max(r.Ops, 1)) }

// loneTimeout is the attempt timeout of the stall cells.
const loneTimeout = 200 * time.Millisecond

// loneServer is a real HTTP server whose answers decide counts per
// operation: decide(op, n) for the n-th request (from 0) of operation op
// says 200, 503, or 0 to stall (hold the request until the client gives
// up, at most a minute).
type loneServer struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	hits     map[string]int
}

func newLoneServer(decide func(op string, method string, n int) int) *loneServer {
	s := &loneServer{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		op := r.Method + " " + r.URL.RequestURI()
		s.mu.Lock()
		n := s.hits[op]
		s.hits[op]++
		s.mu.Unlock()
		switch code := decide(r.URL.Query().Get("op"), r.Method, n); code {
		case 0:
			t := time.NewTimer(time.Minute)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
		case 200:
			w.Header().Set("Content-Length", "2")
			w.Write([]byte("ok"))
		default:
			w.WriteHeader(code)
		}
	}))
	return s
}

// splitmix is SplitMix64: a fixed seed's decision for each request.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// draw is a number in [0, 1) for request n of operation op, from seed.
func draw(seed uint64, op string, n int) float64 {
	id, _ := strconv.ParseUint(op, 10, 64)
	return float64(splitmix(seed^splitmix(id<<8|uint64(n&0xff)))>>11) / (1 << 53)
}

// get sends one GET (or HEAD) through c and reports its status (0: an
// error) and, unless it is 200, why in a few words: the stop reason of
// retrystack's report, else the status or the error.
func get(ctx context.Context, c *http.Client, method, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, why(0, err, engine.ReportFrom(err))
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return 200, ""
	}
	return resp.StatusCode, why(resp.StatusCode, nil, engine.ReportOf(resp))
}

// why is a failure in a few words: the stop reason retrystack's report
// names, else the status, a timeout, or the error's text.
func why(code int, err error, rep *engine.Report) string {
	switch {
	case rep != nil && rep.Stop != "":
		return string(rep.Stop)
	case err == nil:
		return strconv.Itoa(code)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout"
	}
	var sr interface{ StopReason() policy.StopReason }
	if errors.As(err, &sr) {
		return string(sr.StopReason())
	}
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err // not the URL: it names the operation
	}
	s := err.Error()
	if i := strings.Index(s, ". last result"); i > 0 {
		s = s[:i] // failsafe-go's "retries exceeded. last result: …"
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// tally counts failures by why, safe for concurrent use.
type tally struct {
	mu sync.Mutex
	by map[string]int
}

func (t *tally) add(code int, why string) {
	if code == http.StatusOK {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]int{}
	}
	t.by[why]++
}

func (t *tally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, v := range t.by {
		n += v
	}
	return n
}

// String is the failures, most first: "12 timeout-not-retried, 2 503".
func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.Collect(maps.Keys(t.by))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(t.by[b], t.by[a]), cmp.Compare(a, b)) })
	s := ""
	for _, k := range keys {
		s += sep(s) + fmt.Sprintf("%d %s", t.by[k], k)
	}
	return s
}

// LoneStalls is cell a: operations at rate a second for each of clients
// clients side by side (open loop: each started on time, whatever the
// others do), ops in all, each GET attempt timing out after 200 ms; each
// request (every attempt) stalls with probability stall and answers 503
// with probability fail, chosen from seed by the operation and the
// attempt, the same for every configuration. A lone client at 1 request
// a second would take ops seconds: the clients, each with the budget of
// a client of its own, run their shares at the real rate at once, so that
// what each client's budget sees (its own rate, its own failures) is
// what one lone client's would, over ops/clients/rate seconds instead of
// ops/rate.
func LoneStalls(cfg Overloader, rate float64, clients, ops int, stall, fail float64, seed uint64) (LoneResult, error) {
	srv := newLoneServer(func(op, _ string, n int) int {
		switch r := draw(seed, op, n); {
		case r < stall:
			return 0
		case r < stall+fail:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	defer srv.Close()
	cs, trs, err := loneClients(cfg, clients, loneTimeout, nil)
	if err != nil {
		return LoneResult{}, err
	}
	defer closeAll(trs)
	var fails tally
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	per := float64(time.Second) / rate
	// The schedule: operation i is client i%clients's (i/clients)-th, at
	// its offset within the client's period so that the server sees an
	// even load.
	for i := range ops {
		k, j := i%clients, i/clients
		at := time.Duration((float64(j) + float64(k)/float64(clients)) * per)
		if d := time.Until(start.Add(at)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			code, why := get(ctx, cs[k], http.MethodGet, fmt.Sprintf("%s/object?op=%d", srv.URL, i))
			fails.add(code, why)
		})
	}
	// Every operation ends by itself (each library bounds its attempts);
	// a minute after the schedule's end what has not is a failure.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cancel()
		<-done
	}
	n := int(srv.requests.Load())
	return LoneResult{Ops: ops, OK: ops - fails.count(), Requests: n, Attempts: n, Clients: clients, Outcome: fails.String()}, nil
}

// LoneChaos is cell b: ops GETs, inFlight at a time (a closed loop), from
// one client to a healthy server, with a chaos layer below the client
// (below the retry layer: every attempt passes it) that answers 503 in
// place of sending to 10 % of attempts, resets 2 % after sending (the
// server has the request, the client gets ECONNRESET), and delays 30 %
// by 1 to 10 ms, from seed. Requests is the server's count; Attempts the
// attempts the client made, counted above the chaos layer.
func LoneChaos(cfg Overloader, ops, inFlight int, seed uint64) (LoneResult, error) {
	srv := newLoneServer(func(string, string, int) int { return http.StatusOK })
	defer srv.Close()
	var attempts atomic.Int64
	layer := chaos.Layer(chaos.Config{Seed: seed, Faults: []chaos.Fault{
		{Kind: chaos.Latency, Rate: 0.3, Delay: time.Millisecond, Jitter: 9 * time.Millisecond},
		{Kind: chaos.Status, Rate: 0.10, Status: http.StatusServiceUnavailable},
		{Kind: chaos.Reset, Rate: 0.02},
	}})
	if layer.Err != nil {
		return LoneResult{}, layer.Err
	}
	below := func(tr http.RoundTripper) http.RoundTripper {
		faulty := layer.Wrap(tr)
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			attempts.Add(1)
			return faulty.RoundTrip(req)
		})
	}
	cs, trs, err := loneClients(cfg, 1, 0, below)
	if err != nil {
		return LoneResult{}, err
	}
	defer closeAll(trs)
	var fails tally
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(ops); i = next.Add(1) {
				code, why := get(context.Background(), cs[0], http.MethodGet, fmt.Sprintf("%s/object?op=%d", srv.URL, i))
				fails.add(code, why)
			}
		})
	}
	wg.Wait()
	return LoneResult{Ops: ops, OK: ops - fails.count(), Requests: int(srv.requests.Load()), Attempts: int(attempts.Load()), Clients: 1, Outcome: fails.String()}, nil
}

// LoneSDK is cell c, minio-go's StatObject then GetObject in a brief
// outage: a new client sends a HEAD answered 503, 503, then 200, then a
// GET of the same object answered 503, 503, then 200. Outcome tells each
// one's status.
func LoneSDK(cfg Overloader) (LoneResult, error) {
	srv := newLoneServer(func(_, _ string, n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	defer srv.Close()
	cs, trs, err := loneClients(cfg, 1, 0, nil)
	if err != nil {
		return LoneResult{}, err
	}
	defer closeAll(trs)
	res := LoneResult{Ops: 2, Clients: 1}
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		code, why := get(context.Background(), cs[0], m, srv.URL+"/bucket/object")
		if code == 200 {
			res.OK++
		}
		res.Outcome += sep(res.Outcome) + m + " " + status(code, why)
	}
	res.Requests = int(srv.requests.Load())
	res.Attempts = res.Requests
	return res, nil
}

// LoneFirst is cell d, a command-line program's first request: a new
// client, attempts timing out after 200 ms, sends one GET whose first
// attempt stalls and whose second is answered 200.
func LoneFirst(cfg Overloader) (LoneResult, error) {
	srv := newLoneServer(func(_, _ string, n int) int {
		if n == 0 {
			return 0
		}
		return http.StatusOK
	})
	defer srv.Close()
	cs, trs, err := loneClients(cfg, 1, loneTimeout, nil)
	if err != nil {
		return LoneResult{}, err
	}
	defer closeAll(trs)
	code, why := get(context.Background(), cs[0], http.MethodGet, srv.URL+"/first")
	res := LoneResult{Ops: 1, Clients: 1, Requests: int(srv.requests.Load())}
	res.Attempts = res.Requests
	if code == 200 {
		res.OK = 1
	}
	res.Outcome = fmt.Sprintf("%s after %d request(s)", status(code, why), res.Requests)
	return res, nil
}

// LoneAllTimeouts is cell e: a new client whose every attempt stalls
// (each times out after 200 ms) runs ops GETs, started at rate a second
// (an open loop); Requests tells how many it sent. A budget stops it
// after a small stock; without one every operation makes all its
// attempts.
func LoneAllTimeouts(cfg Overloader, ops int, rate float64) (LoneResult, error) {
	srv := newLoneServer(func(string, string, int) int { return 0 })
	defer srv.Close()
	cs, trs, err := loneClients(cfg, 1, loneTimeout, nil)
	if err != nil {
		return LoneResult{}, err
	}
	defer closeAll(trs)
	// Each operation gets a minute (go-retryablehttp's waits after 4
	// failures add up to 15 s): past it, it has failed anyway.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var fails tally
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ops {
		if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			code, why := get(ctx, cs[0], http.MethodGet, fmt.Sprintf("%s/object?op=%d", srv.URL, i))
			fails.add(code, why)
		})
	}
	wg.Wait()
	n := int(srv.requests.Load())
	return LoneResult{Ops: ops, OK: ops - fails.count(), Requests: n, Attempts: n, Clients: 1, Outcome: fails.String()}, nil
}

// loneClients builds n clients of cfg, each over a transport of its own
// (wrapped by below, if set), each attempt timing out after to.
func loneClients(cfg Overloader, n int, to time.Duration, below func(http.RoundTripper) http.RoundTripper) ([]*http.Client, []*http.Transport, error) {
	cs := make([]*http.Client, n)
	trs := make([]*http.Transport, n)
	for i := range n {
		trs[i] = &http.Transport{MaxIdleConnsPerHost: 64}
		var base http.RoundTripper = trs[i]
		if below != nil {
			base = below(base)
		}
		rt, err := cfg.New(base, to)
		if err != nil {
			closeAll(trs[:i+1])
			return nil, nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
		cs[i] = &http.Client{Transport: rt}
	}
	return cs, trs, nil
}

func closeAll(trs []*http.Transport) {
	for _, tr := range trs {
		tr.CloseIdleConnections()
	}
}

func sep(s string) string {
	if s == "" {
		return ""
	}
	return ", "
}

// status is a status, or "failed: " and why.
func status(code int, why string) string {
	if code == http.StatusOK {
		return "200"
	}
	return "failed: " + why
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
