package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/rttest"
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

func newPaced(t *testing.T, p policy.Policy) *paced {
	t.Helper()
	pc := &paced{clock: &clock{t: time.Now()}, next: map[string][]*http.Response{}}
	pc.start = pc.clock.t
	p.Rand = func() float64 { return 0.5 }
	e, err := New(Config{Policy: p})
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
	want := []string{"api.example.com@0", "API.example.com:443@1000", "other.example.com@1000"}
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
	// Without a deadline the next operation waits the 30 s.
	slept := len(pc.clock.slept)
	if rep, err := pc.get(t, context.Background(), "https://api.example.com/c"); err != nil || rep.Stop != policy.StopSuccess || len(pc.clock.slept) != slept+1 || pc.clock.slept[slept] != 30*time.Second {
		t.Errorf("%v, %v, slept %v: want one wait of 30 s, then success", rep, err, pc.clock.slept[slept:])
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
	if pc.rt.(*transport).e.pace.held.Load() != 0 {
		t.Error("Pace off held a host")
	}
}

// The memory is bounded: a host per answer, past the bound, keeps at most
// maxPacedHosts; a hold that has ended is forgotten.
func TestPacerBounded(t *testing.T) {
	var p pacer
	now := time.Unix(1_800_000_000, 0)
	for i := range maxPacedHosts + 50 {
		p.hold(fmt.Sprint("h", i), now.Add(time.Duration(i+1)*time.Millisecond), now)
	}
	if n := len(p.until); n != maxPacedHosts {
		t.Errorf("%d hosts held, want %d", n, maxPacedHosts)
	}
	if !p.heldUntil("h0", now).IsZero() {
		t.Error("the hold that ends first was kept over a later one")
	}
	later := now.Add(time.Hour)
	if !p.heldUntil("h100", later).IsZero() || len(p.until) != maxPacedHosts-1 {
		t.Error("an ended hold was not forgotten")
	}
}
