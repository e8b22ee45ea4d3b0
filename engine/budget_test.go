package engine

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/policy"
)

// budgetClient is one client of Default's policy (its own budget) over a
// real transport, with no waits.
func budgetClient(t *testing.T, tune func(*policy.Policy)) *http.Client {
	t.Helper()
	p := policy.Default()
	if tune != nil {
		tune(&p)
	}
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: e.Layer().Wrap(tr)}
}

// stallFirst stalls the first request of each path until its client gives
// up, then answers every later one 200 at once.
type stallFirst struct{ n atomic.Int64 }

func (s *stallFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/stall-once" && s.n.Add(1) == 1 {
		<-r.Context().Done()
		return
	}
	w.WriteHeader(http.StatusOK)
}

func sendReport(t *testing.T, c *http.Client, method, url string, header ...string) (*Report, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return reportOfError(err), err
	}
	resp.Body.Close()
	return ReportOf(resp), nil
}

func reportOfError(err error) *Report {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Report
	}
	return nil
}

// Default's budget pays for the retry of an attempt that timed out only
// from the successes of the last second (twenty pay for one): a new
// client does not retry a timeout; one that has just had twenty successes
// does once.
func TestTimeoutRetryNeedsRecentSuccesses(t *testing.T) {
	srv := httptest.NewServer(&stallFirst{})
	defer srv.Close()
	attemptTimeout := func(p *policy.Policy) { p.AttemptTimeout = 50 * time.Millisecond }

	c := budgetClient(t, attemptTimeout)
	rep, err := sendReport(t, c, "GET", srv.URL+"/stall-once")
	if err == nil || rep == nil || rep.Stop != policy.StopTimeoutNotRetried || len(rep.Attempts) != 1 {
		t.Fatalf("a new client's timeout: %v, report %+v; want one attempt, timeout-not-retried", err, rep)
	}
	if slices.Contains(rep.Pitfalls, PitfallBudgetExhausted) {
		t.Errorf("pitfalls %v: the budget had credit; its timeout rule refused", rep.Pitfalls)
	}
	if msg := err.Error(); !strings.Contains(msg, "policy.Alone()") || !strings.Contains(msg, "Idempotency-Key") {
		t.Errorf("error %q: want it to name policy.Alone() and an Idempotency-Key", msg)
	}
	if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
		t.Errorf("error %v: want a net.Error whose Timeout() is true", err)
	}

	srv2 := httptest.NewServer(&stallFirst{})
	defer srv2.Close()
	c = budgetClient(t, attemptTimeout)
	for range 20 {
		if _, err := sendReport(t, c, "GET", srv2.URL+"/ok"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = sendReport(t, c, "GET", srv2.URL+"/stall-once")
	if err != nil || rep.Stop != policy.StopSuccess || len(rep.Attempts) != 2 {
		t.Fatalf("after twenty successes: %v, report %+v; want the timeout retried once, success", err, rep)
	}
}

// A keyed request's timeout is retried from the stock: a server that
// honours the key does not do the work twice.
func TestKeyedTimeoutRetriedFromStock(t *testing.T) {
	srv := httptest.NewServer(&stallFirst{})
	defer srv.Close()
	c := budgetClient(t, func(p *policy.Policy) { p.AttemptTimeout = 50 * time.Millisecond })
	rep, err := sendReport(t, c, "POST", srv.URL+"/stall-once", "Idempotency-Key", `"k-1"`)
	if err != nil || rep.Stop != policy.StopSuccess || len(rep.Attempts) != 2 {
		t.Fatalf("a new client's keyed POST: %v, report %+v; want the timeout retried, success", err, rep)
	}
}

// Resending an attempt that never reached the server costs the budget
// nothing: a client whose stock is spent still redials a refused
// connection up to MaxAttempts.
func TestUnsentRetriesAreFree(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	c := budgetClient(t, nil)
	if rep, _ := sendReport(t, c, "GET", down.URL); rep.Stop != policy.StopAttemptsExhausted {
		t.Fatalf("spending the stock: stop %s", rep.Stop)
	}
	if rep, _ := sendReport(t, c, "GET", down.URL); rep.Stop != policy.StopBudgetExhausted {
		t.Fatalf("the stock should be spent: stop %s", rep.Stop)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close() // nothing listens: every dial is refused
	rep, err := sendReport(t, c, "GET", closed)
	if err == nil || rep == nil || rep.Stop != policy.StopAttemptsExhausted || len(rep.Attempts) != 3 {
		t.Fatalf("refused dials with the stock spent: %v, report %+v; want 3 attempts, attempts-exhausted", err, rep)
	}
}

// A retry that succeeds pays for itself: a client whose every request
// needs one retry keeps retrying, where one whose retries fail stops.
func TestSucceedingRetriesKeepTheBudget(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // every request's first attempt
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	c := budgetClient(t, nil)
	for i := range 50 {
		rep, err := sendReport(t, c, "GET", srv.URL)
		if err != nil || rep.Stop != policy.StopSuccess {
			t.Fatalf("request %d: %v, stop %v; want each retried to success", i, err, rep.Stop)
		}
	}
}

// Asking again for a keyed request still in flight costs no budget, but
// never becomes a loop: with a zero Backoff the asks wait 100 ms each.
func TestPollsWaitEvenWithoutBackoff(t *testing.T) {
	var asks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asks.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"https://iana.org/assignments/http-problem-types#idempotency-key-in-flight","status":409}`)
	}))
	defer srv.Close()
	p := policy.Default()
	p.Backoff, p.Timeout = policy.Backoff{}, 300*time.Millisecond
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()} // waits move it, not the wall clock
	e.now, e.sleep = clk.now, clk.sleep
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: e.Layer().Wrap(tr)}
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("order"))
	req.Header.Set("Idempotency-Key", `"k-1"`)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rep := ReportOf(resp); rep.Stop != policy.StopKeyInFlight || asks.Load() > 4 {
		t.Fatalf("%d requests in 300 ms, stop %s; want at most 4 (an ask every 100 ms), key-in-flight", asks.Load(), rep.Stop)
	}
	for _, w := range clk.slept {
		if w < minPollWait {
			t.Fatalf("an ask again waited %v, want at least %v", w, minPollWait)
		}
	}
}

// An ask for a keyed request in flight that times out is asked again
// within the deadline, as a 409 is: it sent no work. Under load an ask
// can take longer than AttemptTimeout, and the write that succeeded was
// reported attempts-exhausted.
func TestAskThatTimesOutIsAskedAgain(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1, 3: // the write itself, then an ask the server is slow to answer
			<-r.Context().Done()
		case 2:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"type":"https://iana.org/assignments/http-problem-types#idempotency-key-in-flight","status":409}`)
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	c := budgetClient(t, func(p *policy.Policy) { p.AttemptTimeout, p.Timeout = 50*time.Millisecond, 10*time.Second })
	rep, err := sendReport(t, c, "POST", srv.URL, "Idempotency-Key", `"k-1"`)
	if err != nil || rep.Stop != policy.StopSuccess || n.Load() != 4 {
		t.Fatalf("%v, stop %v, %d requests; want the timed-out ask asked again, success after 4", err, rep, n.Load())
	}
}

// scripted answers each request of a path with the next status of its
// script, 200 once the script is spent; "stall" holds the request until
// its client gives up.
type scripted struct {
	mu     sync.Mutex
	script map[string][]string
	sent   map[string]int
}

func newScripted(script map[string][]string) *scripted {
	return &scripted{script: script, sent: map[string]int{}}
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	n := s.sent[key]
	s.sent[key]++
	next := "200"
	if n < len(s.script[key]) {
		next = s.script[key][n]
	}
	s.mu.Unlock()
	if next == "stall" {
		<-r.Context().Done()
		return
	}
	code, _ := strconv.Atoi(next)
	w.WriteHeader(code)
}

func (s *scripted) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[key]
}

// Every retry of an operation that ends in success is paid back, not only
// the last: a new client's HEAD answered 503, 503, 200 leaves the stock
// whole for the GET that meets the same outage (minio-go's StatObject,
// then GetObject).
func TestSucceedingChainIsPaidBackWhole(t *testing.T) {
	srv := httptest.NewServer(newScripted(map[string][]string{
		"HEAD /o": {"503", "503"},
		"GET /o":  {"503", "503"},
	}))
	defer srv.Close()
	c := budgetClient(t, nil)
	for _, m := range []string{"HEAD", "GET"} {
		rep, err := sendReport(t, c, m, srv.URL+"/o")
		if err != nil || rep.Stop != policy.StopSuccess || len(rep.Attempts) != 3 {
			t.Fatalf("%s: %v, report %v; want 3 attempts, success", m, err, rep)
		}
	}
}

// Alone retries a timed-out attempt from its stock: a command-line
// program's first request, whose first attempt stalls, succeeds; a client
// whose every attempt times out still stops after its stock of two.
func TestAloneRetriesTimeouts(t *testing.T) {
	srv := httptest.NewServer(newScripted(map[string][]string{
		"GET /first": {"stall"},
		"GET /dead":  slices.Repeat([]string{"stall"}, 100),
	}))
	defer srv.Close()
	alone := func(p *policy.Policy) {
		*p = policy.Alone()
		p.AttemptTimeout = 50 * time.Millisecond
	}
	c := budgetClient(t, alone)
	rep, err := sendReport(t, c, "GET", srv.URL+"/first")
	if err != nil || rep.Stop != policy.StopSuccess || len(rep.Attempts) != 2 {
		t.Fatalf("a new client's first GET, stalled once: %v, report %v; want 2 attempts, success", err, rep)
	}

	c = budgetClient(t, alone)
	var stops []policy.StopReason
	for range 4 {
		rep, err := sendReport(t, c, "GET", srv.URL+"/dead")
		if err == nil {
			t.Fatal("a stalled GET succeeded")
		}
		stops = append(stops, rep.Stop)
	}
	want := []policy.StopReason{policy.StopAttemptsExhausted, policy.StopBudgetExhausted, policy.StopBudgetExhausted, policy.StopBudgetExhausted}
	if !slices.Equal(stops, want) || srv.Config.Handler.(*scripted).count("GET /dead") != 6 {
		t.Fatalf("4 GETs that always stall: stops %v and %d requests; want %v and 3+1+1+1", stops, srv.Config.Handler.(*scripted).count("GET /dead"), want)
	}
}
