package retrystack_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/throttle"
)

// rewinder is a body that can Seek (not ReadAt): its rewinding Seeks
// (whence io.SeekStart) from the failAt-th on fail, as a pipe's or a
// socket's would.
type rewinder struct {
	*strings.Reader
	failAt  int32
	rewinds atomic.Int32
}

func (r *rewinder) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart && r.rewinds.Add(1) >= r.failAt {
		return 0, errors.New("seek: illegal seek")
	}
	return r.Reader.Seek(off, whence)
}
func (r *rewinder) ReadAt()      {} // shadows strings.Reader's: not an io.ReaderAt
func (r *rewinder) Close() error { return nil }

// A PUT whose body can Seek but whose rewinding Seek fails: the replays
// end with body-not-replayable as soon as the rewind fails, and the caller
// gets the answer in hand (the 503 it was sent), with as many attempts as
// the server received; an error, where there is one, names the Seek. On
// the first rewind and on the second. (Issue 36: the report counted 2
// attempts [503 error], stopped non-retryable, and the error spoke of the
// replay buffer.)
func TestFailedRewindEndsTheReplays(t *testing.T) {
	srv := newServer(t)
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, tc := range []struct {
		name     string
		path     string
		failAt   int32 // the rewind that fails
		requests int
		status   int  // 0: an error
		fail     bool // FailOnExhausted: the 503 as an error
	}{
		{"first rewind", "/fail/1/503", 1, 1, 503, false},
		{"second rewind", "/fail/2/503", 2, 2, 503, false},
		{"first rewind after a reset", "/abort", 1, 1, 0, false},
		{"first rewind, FailOnExhausted", "/fail/1/503", 1, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr, FailOnExhausted: tc.fail})
			if err != nil {
				t.Fatal(err)
			}
			key := strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			body := &rewinder{Reader: strings.NewReader("the upload"), failAt: tc.failAt}
			req, _ := http.NewRequest("PUT", srv.URL()+tc.path+"?key="+key, body)
			resp, err := c.Do(req)
			var rep *engine.Report
			if tc.status == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%d, want an error", resp.StatusCode)
				}
				if !strings.Contains(err.Error(), "seek") || !strings.Contains(err.Error(), "rewinding") {
					t.Errorf("the error does not name the Seek: %v", err)
				}
				rep = engine.ReportFrom(err)
			} else {
				if err != nil {
					t.Fatalf("%v, want %d", err, tc.status)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				rep = engine.ReportOf(resp)
			}
			if len(rep.Attempts) != tc.requests || rep.Stop != policy.StopBodyNotReplayable {
				t.Errorf("report %v; want %d attempt(s), %s", rep, tc.requests, policy.StopBodyNotReplayable)
			}
			var sums []string
			for _, e := range srv.Log() {
				if e.Key == key {
					sums = append(sums, e.BodySum)
				}
			}
			if len(sums) != tc.requests {
				t.Errorf("the server received %d requests, want %d", len(sums), tc.requests)
			}
			for _, s := range sums {
				if s != sums[0] || s == "" {
					t.Errorf("the server received bodies %q, want the same each time", sums)
					break
				}
			}
		})
	}
}

// full is the refusal of a layer that found no room: it names its stop.
type full struct{}

func (full) Error() string                 { return "limit: no room before the deadline" }
func (full) StopReason() policy.StopReason { return "concurrency-limited" }

// waitForDeadline is a layer that waits for room until the operation's
// deadline, then either refuses itself or lets the layers below (an open
// breaker, a throttle) refuse. byTimer: it waits on a timer of its own to
// the deadline, which may fire before or after the context's; otherwise
// on the context, which has fired.
func waitForDeadline(byTimer, refuse bool) middleware.Layer {
	return middleware.Layer{Name: "limit", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if dl, ok := req.Context().Deadline(); ok && byTimer {
				t := time.NewTimer(time.Until(dl))
				defer t.Stop()
				<-t.C
			} else {
				<-req.Context().Done()
			}
			if refuse {
				if req.Body != nil {
					req.Body.Close()
				}
				return nil, full{}
			}
			return next.RoundTrip(req)
		})
	}}
}

// A layer below the retry layer that refuses at the operation's deadline
// (after waiting for room until then, or because a breaker or throttle
// below it refuses once the wait is over) stops the operation with the
// refusal's own reason, whichever clock fires first: its own timer or the
// deadline's. (Issue 36: deadline when the context's clock fired first.)
func TestRefusalAtTheDeadlineKeepsItsReason(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name    string
		below   func() middleware.Layer // under the waiting layer; nil: it refuses itself
		prepare string                  // a path to send first, through the same stack, to trip it
		stop    policy.StopReason
	}{
		{"own refusal", nil, "", "concurrency-limited"},
		{"open breaker", func() middleware.Layer { return breaker.Layer(breaker.Config{Consecutive: 1, OpenFor: time.Hour}) }, "/s/503", policy.StopCircuitOpen},
		{"throttle", func() middleware.Layer {
			return throttle.Layer(throttle.Config{Rand: func() float64 { return 0 }})
		}, "/s/503", policy.StopThrottled},
	} {
		for _, byTimer := range []bool{false, true} {
			name := tc.name + "/context"
			if byTimer {
				name = tc.name + "/timer"
			}
			t.Run(name, func(t *testing.T) {
				p := policy.Never()
				p.Timeout = 20 * time.Millisecond
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				stack, err := retrystack.NewStack(retrystack.Config{Policy: &p})
				if err != nil {
					t.Fatal(err)
				}
				after := "retry"
				if tc.below != nil {
					if stack, err = stack.InsertAfter("retry", tc.below()); err != nil {
						t.Fatal(err)
					}
				}
				armed := atomic.Bool{}
				gate := waitForDeadline(byTimer, tc.below == nil)
				stack, err = stack.InsertAfter(after, middleware.Layer{Name: "limit", Wrap: func(next http.RoundTripper) http.RoundTripper {
					wait := gate.Wrap(next)
					return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
						if !armed.Load() {
							return next.RoundTrip(req) // the request that trips the layers below
						}
						return wait.RoundTrip(req)
					})
				}})
				if err != nil {
					t.Fatal(err)
				}
				c := retrystack.Client(stack, tr)
				if tc.prepare != "" {
					for range 20 { // the throttle needs ten rejections to refuse
						resp, err := c.Get(srv.URL() + tc.prepare)
						if err != nil {
							break // tripped
						}
						resp.Body.Close()
					}
				}
				armed.Store(true)
				resp, err := c.Get(srv.URL() + "/s/200")
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%d, want a refusal", resp.StatusCode)
				}
				rep := engine.ReportFrom(err)
				if rep == nil || rep.Stop != tc.stop || len(rep.Attempts) != 1 {
					t.Errorf("report %v (%v); want 1 attempt, %s", rep, err, tc.stop)
				}
				if r, ok := errors.AsType[policy.Refusal](err); !ok || r.StopReason() != tc.stop {
					t.Errorf("error %v is not the refusal", err)
				}
			})
		}
	}
}

// A caller that cancels still overrules a refusal: it gave up.
func TestRefusalAfterTheCallerCancelled(t *testing.T) {
	srv := newServer(t)
	p := policy.Never()
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p})
	if err != nil {
		t.Fatal(err)
	}
	if stack, err = stack.InsertAfter("retry", waitForDeadline(false, true)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL()+"/s/200", nil)
	c := retrystack.Client(stack, nil)
	cancel()
	if _, err := c.Do(req); engine.ReportFrom(err) == nil || engine.ReportFrom(err).Stop != policy.StopCancelled {
		t.Errorf("%v; want cancelled", err)
	}
}

// A report's counts mean what their docs say in every order of the
// layers: with the retry layer above the redirect layer, a hop is a
// redirect of its attempt, not a send net/http made on its own, and the
// attempt says it was redirected; under a hedge too. Every request the
// server received is an attempt, a hop, a hedge or a transparent resend,
// counted once. (Issue 36: each hop counted as transparent, the 302
// hidden; with a hedge above the retry layer, the response carried the
// report of the send that lost.)
func TestCountsWithRetryAboveRedirect(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		switch r.URL.Path {
		case "/flaky": // 503 once, then a redirect
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			http.Redirect(w, r, "/end", http.StatusFound)
		case "/slow": // the first send stalls until it loses to its hedge
			if n == 1 {
				<-r.Context().Done()
				return
			}
			http.Redirect(w, r, "/end", http.StatusFound)
		case "/end":
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name      string
		order     []string
		path      string
		statuses  []int
		redirects int
		hedges    int
		requests  int // the server's
		others    int // of them, sends the report does not cover: a losing hedge's above the retry layer
	}{
		{"retry above redirect", []string{"retry", "redirect"}, "/flaky", []int{503, 200}, 1, 0, 3, 0},
		{"retry above a hedge above redirect", []string{"retry", "hedge", "redirect"}, "/slow", []int{200}, 1, 1, 3, 0},
		// Each send of the hedge runs the retry layer: the response's
		// report is the winning send's, not the owner's that lost.
		{"a hedge above retry above redirect", []string{"hedge", "retry", "redirect"}, "/slow", []int{200}, 1, 0, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			clear(seen)
			mu.Unlock()
			p := policy.Default()
			p.Backoff, p.Budget = policy.Backoff{}, nil
			stack, err := retrystack.NewStack(retrystack.Config{Policy: &p})
			if err == nil {
				stack, err = stack.InsertAfter("retry", hedge.Layer(hedge.Config{Delay: 10 * time.Millisecond}))
			}
			for _, name := range []string{"cookies", "hedge"} {
				if err == nil && !slices.Contains(tc.order, name) {
					stack, err = stack.Without(name)
				}
			}
			if err == nil {
				stack, err = stack.Select(tc.order...)
			}
			if err != nil {
				t.Fatal(err)
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := retrystack.Client(stack, tr).Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rep := engine.ReportOf(resp)
			var statuses []int
			redirects, hedges := 0, 0
			for _, a := range rep.Attempts {
				statuses = append(statuses, a.Status)
				redirects += a.Redirects
				hedges += a.Hedges
			}
			if !slices.Equal(statuses, tc.statuses) || redirects != tc.redirects || hedges != tc.hedges || rep.TransparentAttempts() != 0 {
				t.Errorf("report %v: statuses %v, %d redirects, %d hedges, %d transparent; want %v, %d, %d, 0",
					rep, statuses, redirects, hedges, rep.TransparentAttempts(), tc.statuses, tc.redirects, tc.hedges)
			}
			mu.Lock()
			requests := seen["/flaky"] + seen["/slow"] + seen["/end"]
			mu.Unlock()
			if counted := len(rep.Attempts) + redirects + hedges + rep.TransparentAttempts() + tc.others; counted != tc.requests || requests != tc.requests {
				t.Errorf("the server received %d requests, the report counts %d; want %d", requests, counted, tc.requests)
			}
			if !strings.Contains(rep.String(), "redirect") {
				t.Errorf("the report's summary %q hides the redirect", rep)
			}
		})
	}
}
