package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// paced is a retry layer on virtual time over a base that answers each
// host with the script of its own, then 200; it records what was sent.
type paced struct {
	clock *clock
	rt    http.RoundTripper
	mu    sync.Mutex
	sent  []string // "host@ms since start"
	start time.Time
	next  map[string][]*http.Response
}

func newPaced(t *testing.T, p policy.Policy, cfg ...func(*Config)) *paced {
	t.Helper()
	pc := &paced{clock: &clock{t: time.Now()}, next: map[string][]*http.Response{}}
	pc.start = pc.clock.t
	p.Rand = func() float64 { return 0.5 }
	c := Config{Policy: p}
	for _, fn := range cfg {
		fn(&c)
	}
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.now, e.sleep = pc.clock.now, pc.clock.sleep
	pc.rt = e.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pc.sent = append(pc.sent, fmt.Sprintf("%s@%d", req.URL.Host, pc.clock.now().Sub(pc.start).Milliseconds()))
		if q := pc.next[req.URL.Host]; len(q) > 0 {
			pc.next[req.URL.Host] = q[1:]
			q[0].Request = req
			return q[0], nil
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	return pc
}

func answer(status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Header: h}
}

func (pc *paced) get(t *testing.T, ctx context.Context, url string) (*Report, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := pc.rt.RoundTrip(req)
	if err != nil {
		return ReportFrom(err), err
	}
	resp.Body.Close()
	return ReportOf(resp), nil
}

// After a 429 whose RateLimit says nothing remains for 1 s, the next
// operation to that host (another path, the host spelt otherwise) waits
// for the reset before it sends, instead of meeting the same 429; another
// host is not held back.
func TestPacingHoldsTheHost(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 1 // the first operation stops at its 429: only the hold remains
	pc := newPaced(t, p)
	pc.next["api.example.com"] = []*http.Response{answer(429, "RateLimit", `"default";r=0;t=1`)}
	ctx := context.Background()
	pc.get(t, ctx, "https://api.example.com/a")
	if rep, err := pc.get(t, ctx, "https://API.example.com:443/b"); err != nil || rep.Stop != policy.StopSuccess {
		t.Fatalf("the second: %v, %v", rep, err)
	}
	if rep, err := pc.get(t, ctx, "https://other.example.com/"); err != nil || rep.Stop != policy.StopSuccess {
		t.Fatalf("another host: %v, %v", rep, err)
	}
	want := []string{"api.example.com@0", "API.example.com:443@1050", "other.example.com@1050"} // 1 s and a jitter of 0.5 of its tenth
	if strings.Join(pc.sent, " ") != strings.Join(want, " ") {
		t.Errorf("sent %v, want %v", pc.sent, want)
	}
}

// A hold that ends after the operation's deadline stops it at once, with
// nothing sent and the body closed; a hold within it is waited for.
func TestPacingWithinTheDeadline(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 1
	pc := newPaced(t, p)
	pc.next["api.example.com"] = []*http.Response{answer(429, "Retry-After", "30")}
	pc.get(t, context.Background(), "https://api.example.com/a") // 429, not retried: the host held 30 s
	before := len(pc.sent)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := &rttest.Body{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, "PUT", "https://API.example.com:443/b", body)
	_, err := pc.rt.RoundTrip(req)
	rep := ReportFrom(err)
	var ee *Error
	if !errors.As(err, &ee) || rep == nil || rep.Stop != policy.StopWaitExceedsBudget || len(pc.sent) != before || !body.Closed() || len(rep.Attempts) != 0 {
		t.Fatalf("%v (%v): want wait-exceeds-budget at once, nothing sent, the body closed", err, rep)
	}
	if !strings.Contains(err.Error(), "api.example.com") {
		t.Errorf("the error %q does not name the host", err)
	}
	// Without a deadline the next operation waits the 30 s, and up to a
	// tenth more (jitter 0.5 here), so that those held back do not all
	// return together.
	slept := len(pc.clock.slept)
	if rep, err := pc.get(t, context.Background(), "https://api.example.com/c"); err != nil || rep.Stop != policy.StopSuccess || len(pc.clock.slept) != slept+1 || pc.clock.slept[slept] != 31500*time.Millisecond {
		t.Errorf("%v, %v, slept %v: want one wait of 31.5 s, then success", rep, err, pc.clock.slept[slept:])
	}
}

// Absurd hints hold a host back at most RetryAfter.Max (a minute by
// default), never past it; Pace off holds nothing.
func TestPacingBounds(t *testing.T) {
	for _, hint := range []string{`"a";r=0;t=99999999999999`, `"a";r=0;t=-5`, `"a";r=0;t=1e9`, `"a";r=x;t=5`, `a`, `"a";r=0;t=3, "b";r=0;t=7000`} {
		pc := newPaced(t, policy.Default())
		pc.next["h"] = []*http.Response{answer(429, "RateLimit", hint)}
		p := pc
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		p.get(t, ctx, "https://h/a")
		held := p.rt.(*transport).e.pace.heldUntil("h", p.clock.now())
		if d := held.Sub(p.clock.now()); d > time.Minute {
			t.Errorf("%q: held %v, want at most a minute", hint, d)
		}
		cancel()
	}
	p := policy.Default()
	p.RetryAfter.Pace = false
	pc := newPaced(t, p)
	pc.next["h"] = []*http.Response{answer(429, "Retry-After", "5")}
	pc.get(t, context.Background(), "https://h/a")
	if pc.rt.(*transport).e.pace.until.Len() != 0 {
		t.Error("Pace off held a host")
	}
}

// The memory is bounded: past the bound a tenth of the holds is
// forgotten at once (ended ones first), so the scan is paid rarely; a
// hold that has ended is forgotten when met.
func TestPacerBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	p := newPacer(func() time.Time { return now })
	for i := range maxPacedHosts + 50 {
		p.hold(fmt.Sprint("h", i), now.Add(time.Hour))
	}
	if n := p.until.Len(); n > maxPacedHosts || n < maxPacedHosts*9/10 {
		t.Errorf("%d hosts held, want at most %d and most of them", n, maxPacedHosts)
	}
	if !p.heldUntil("h"+fmt.Sprint(maxPacedHosts+49), now).Equal(now.Add(time.Hour)) {
		t.Error("the newest hold was forgotten")
	}
	n := p.until.Len()
	if !p.heldUntil("h"+fmt.Sprint(maxPacedHosts+49), now.Add(2*time.Hour)).IsZero() || p.until.Len() != n-1 {
		t.Error("an ended hold was not forgotten")
	}
}

// A Prepare that sends every attempt elsewhere: the hold is the host the
// caller addressed, as is the lookup, so the next operation waits.
func TestPacingWithPrepare(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 1
	pc := newPaced(t, p, func(c *Config) {
		c.Prepare = func(r *http.Request, _ int) error { r.URL.Host = "b.example"; return nil }
	})
	pc.next["b.example"] = []*http.Response{answer(429, "Retry-After", "30")}
	pc.get(t, context.Background(), "https://a.example/x")
	pc.get(t, context.Background(), "https://a.example/y")
	if want := "b.example@0 b.example@31500"; strings.Join(pc.sent, " ") != want {
		t.Errorf("sent %v, want %s", pc.sent, want)
	}
}

// A retry whose host another operation's answer holds longer while it
// waits is held too (it checks the hold again when its wait ends): past
// the deadline it is not sent. The answer it would have replaced was
// released when the wait began, so the caller gets the hold's error; it
// used to be sent at once, and meet the same 429 (issue 44).
func TestPacedRetryFollowsALongerHold(t *testing.T) {
	pc := newPaced(t, policy.Default())
	pc.next["h"] = []*http.Response{answer(503, "Retry-After", "1"), answer(200)}
	pc.clock.during = func() { // another operation's 429 holds the host 30 s while this one waits
		pc.clock.during = nil
		pc.rt.(*transport).e.pace.hold("h", pc.clock.t.Add(30*time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://h/x", nil)
	_, err := pc.rt.RoundTrip(req)
	var paced *pacedError
	if !errors.As(err, &paced) || paced.host != "h" {
		t.Fatalf("%v: want the host's hold, past the deadline", err)
	}
	if rep := ReportFrom(err); rep.Stop != policy.StopWaitExceedsBudget || len(rep.Attempts) != 1 || len(pc.sent) != 1 {
		t.Errorf("%v, sent %v: want 1 attempt sent, wait-exceeds-budget", rep, pc.sent)
	}

	// Within the deadline, the retry waits for the longer hold and goes.
	pc = newPaced(t, policy.Default())
	pc.next["h"] = []*http.Response{answer(503, "Retry-After", "1"), answer(200)}
	pc.clock.during = func() {
		pc.clock.during = nil
		pc.rt.(*transport).e.pace.hold("h", pc.clock.t.Add(5*time.Second))
	}
	req, _ = http.NewRequestWithContext(context.Background(), "GET", "https://h/x", nil)
	resp, err := pc.rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(pc.sent) != 2 || !strings.HasPrefix(pc.sent[1], "h@") {
		t.Fatalf("sent %v: want the retry", pc.sent)
	}
	var at int
	fmt.Sscanf(strings.TrimPrefix(pc.sent[1], "h@"), "%d", &at)
	if at < 6000 {
		t.Errorf("the retry went at %d ms, want after the longer hold (1 s own wait, then 5 s)", at)
	}
}

// A request already waiting out a host's hold is held again when a later
// answer asks for longer: it goes when the longer hold ends, not when the
// first did (under nginx's limit_req, the paced requests released
// together met 429s again).
func TestPacedFirstAttemptFollowsALongerHold(t *testing.T) {
	pc := newPaced(t, policy.Default())
	pc.rt.(*transport).e.pace.hold("h", pc.clock.t.Add(time.Second))
	pc.clock.during = func() { // while it waits, a 429 elsewhere asks for 5 s
		pc.clock.during = nil
		pc.rt.(*transport).e.pace.hold("h", pc.clock.t.Add(5*time.Second))
	}
	if _, err := pc.get(t, context.Background(), "https://h/x"); err != nil {
		t.Fatal(err)
	}
	var at int
	if len(pc.sent) != 1 {
		t.Fatalf("sent %v", pc.sent)
	}
	fmt.Sscanf(strings.TrimPrefix(pc.sent[0], "h@"), "%d", &at)
	if at < 6000 {
		t.Errorf("sent at %d ms, want after the longer hold (1 s, then 5 s more)", at)
	}
}

// A pacing wait is in the report of the operation it held back, with its
// host, the hold's end and the wait, and in the report's String; a hold
// past the deadline is recorded with no wait, and the operation it
// stopped says until when.
func TestPacingWaitsInTheReport(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 1
	pc := newPaced(t, p)
	pc.next["api.example.com"] = []*http.Response{answer(429, "Retry-After", "30")}
	first, _ := pc.get(t, context.Background(), "https://api.example.com/a")
	if len(first.Paced) != 0 {
		t.Fatalf("the operation that met the 429 was not held back: %+v", first.Paced)
	}
	until := pc.start.Add(30 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := pc.get(t, ctx, "https://api.example.com/b")
	want := []PacedWait{{Before: 1, Host: "api.example.com", Until: until}}
	if err == nil || len(rep.Paced) != 1 || !samePaced(rep.Paced[0], want[0]) {
		t.Fatalf("under a 10 s deadline: %v, paced %+v; want %+v", err, rep.Paced, want)
	}
	if s := rep.String(); !strings.Contains(s, "api.example.com held until") {
		t.Errorf("String %q does not say the host was held", s)
	}

	rep, err = pc.get(t, context.Background(), "https://api.example.com/c")
	want = []PacedWait{{Before: 1, Host: "api.example.com", Until: until, Waited: 31500 * time.Millisecond}}
	if err != nil || len(rep.Paced) != 1 || !samePaced(rep.Paced[0], want[0]) {
		t.Fatalf("without a deadline: %v, paced %+v; want %+v", err, rep.Paced, want)
	}
	if s := rep.String(); !strings.Contains(s, "paced 31.5s for api.example.com") {
		t.Errorf("String %q does not show the wait", s)
	}
}

func samePaced(a, b PacedWait) bool {
	return a.Before == b.Before && a.Host == b.Host && a.Until.Equal(b.Until) && a.Waited == b.Waited
}

// A caller can see how long a host is held before sending: the host of
// any path, however spelt; another host is not held.
func TestPacedUntil(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 1
	pc := newPaced(t, p)
	pc.next["api.example.com"] = []*http.Response{answer(429, "Retry-After", "30")}
	pc.get(t, context.Background(), "https://api.example.com/a")
	e := pc.rt.(*transport).e
	held, _ := url.Parse("https://API.example.com:443/other")
	other, _ := url.Parse("https://other.example.com/")
	if got, want := e.PacedUntil(held), pc.start.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("held until %v, want %v", got, want)
	}
	if got := e.PacedUntil(other); !got.IsZero() {
		t.Errorf("another host held until %v", got)
	}
}

// sharedHolds is a policy.Pacer in memory: what two engines given the same
// one share, as a fleet's processes share stores/redis's Fleet.
type sharedHolds struct {
	mu    sync.Mutex
	until map[string]time.Time
	told  []string
}

func (s *sharedHolds) Hold(req *http.Request, host string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told = append(s.told, req.URL.Path+" "+host)
	if until.After(s.until[host]) {
		s.until[host] = until
	}
}

func (s *sharedHolds) HeldUntil(req *http.Request, host string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until[host]
}

// A hold one client's answer asks for is told to the shared Pacer, and
// another client with the same Pacer waits for it as for its own: the wait
// is in its report.
func TestSharedPacingHoldsAnotherClient(t *testing.T) {
	shared := &sharedHolds{until: map[string]time.Time{}}
	p := policy.Default()
	p.MaxAttempts = 1
	p.RetryAfter.Shared = shared
	a, b := newPaced(t, p), newPaced(t, p)
	b.clock.t, b.start = a.clock.t, a.start // one time: the holds compare
	a.next["API.example.com"] = []*http.Response{answer(429, "Retry-After", "30")}
	a.get(t, context.Background(), "https://API.example.com/a")
	until := a.start.Add(30 * time.Second)
	if len(shared.told) != 1 || shared.told[0] != "/a api.example.com" || !shared.until["api.example.com"].Equal(until) {
		t.Fatalf("the shared Pacer was told %q, holds %v; want one hold of api.example.com until %v", shared.told, shared.until, until)
	}

	rep, err := b.get(t, context.Background(), "https://api.example.com/b")
	want := PacedWait{Before: 1, Host: "api.example.com", Until: until, Waited: 31500 * time.Millisecond}
	if err != nil || len(rep.Paced) != 1 || !samePaced(rep.Paced[0], want) {
		t.Fatalf("the other client: %v, paced %+v; want %+v", err, rep.Paced, want)
	}
	if got := b.sent; len(got) != 1 || got[0] != "api.example.com@31500" {
		t.Errorf("the other client sent %q, want one request after the hold", got)
	}
	// A shared hold that has ended holds nothing.
	rep, err = b.get(t, context.Background(), "https://api.example.com/c")
	if err != nil || len(rep.Paced) != 0 {
		t.Errorf("after the hold: %v, paced %+v", err, rep.Paced)
	}
}

// Shared without Pace is a configuration error: it would never be asked.
func TestSharedNeedsPace(t *testing.T) {
	p := policy.Default()
	p.RetryAfter.Pace = false
	p.RetryAfter.Shared = &sharedHolds{}
	_, err := New(Config{Policy: p})
	var ce *policy.ConfigError
	if !errors.As(err, &ce) || !strings.HasSuffix(ce.Field, "RetryAfter.Shared") {
		t.Errorf("New = %v, want a *policy.ConfigError for RetryAfter.Shared", err)
	}
}
