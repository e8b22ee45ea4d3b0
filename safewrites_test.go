package retrystack_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// writeService is an orders service behind idempotency.Handler. Its
// handler waits on gate, when set, before it writes; served409 is closed
// once the middleware has answered a duplicate 409, which is when a test
// lets the handler go on: no timing decides a verdict.
type writeService struct {
	runs, writes atomic.Int32
	requests     atomic.Int32
	gate         chan struct{}
	panicFirst   bool
	served409    chan struct{}
	wrote        chan struct{} // closed by the write
	once409      sync.Once
	on409        func()
}

func (s *writeService) handler() http.Handler {
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.runs.Add(1) == 1 && s.panicFirst {
			panic(http.ErrAbortHandler)
		}
		if s.gate != nil {
			// As database code does, the handler honours its context: the
			// middleware's must not end when the client goes away (an
			// attempt timeout, a hedge that lost), or the stored answer
			// would be a cancellation's, for a write that never happened.
			select {
			case <-s.gate:
			case <-r.Context().Done():
				http.Error(w, "cancelled", http.StatusInternalServerError)
				return
			}
		}
		if s.writes.Add(1) == 1 {
			close(s.wrote)
		}
		http.SetCookie(w, &http.Cookie{Name: "order", Value: "1"})
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"order":1}`)
	})
	protected := idempotency.Handler(orders, idempotency.Config{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		sw := &statusWriter{ResponseWriter: w}
		protected.ServeHTTP(sw, r)
		if sw.code == http.StatusConflict {
			s.once409.Do(func() {
				close(s.served409)
				if s.on409 != nil {
					s.on409()
				}
			})
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The two halves of safe writes as one protocol, with the layers they
// meet, over HTTP/1.1 and h2c: whatever the path, the order is written
// once, and the caller gets its answer (or, when time runs out while the
// server still works on it, key-in-flight: never a 409 for a write that
// succeeded).
func TestSafeWritesEndToEnd(t *testing.T) {
	type outcome struct {
		status int // 0: an error
		stop   policy.StopReason
		replay bool
		runs   int32 // handler runs, a panicking one included
	}
	cases := []struct {
		name  string
		setup func(s *writeService, p *policy.Policy, hc *hedge.Config, cancel context.CancelFunc)
		want  outcome
		// eitherReplay: the original's answer and the stored one race
		// to the caller; either is right.
		eitherReplay bool
	}{
		{"hedged-default", func(s *writeService, p *policy.Policy, hc *hedge.Config, _ context.CancelFunc) {
			// The hedge would fire after 1 ms; the write takes longer.
			hc.Delay = time.Millisecond
			s.gate = make(chan struct{})
			time.AfterFunc(30*time.Millisecond, func() { close(s.gate) }) // the write's own work; a shorter one only weakens the check
		}, outcome{201, policy.StopSuccess, false, 1}, false},
		{"hedged-opted-in", func(s *writeService, p *policy.Policy, hc *hedge.Config, _ context.CancelFunc) {
			// A user who hedges keyed writes anyway: the hedge meets 409,
			// and the retry layer asks until the first's answer is stored.
			hc.Delay, hc.Safe = time.Millisecond, policy.Idempotent
			s.gate = s.served409
		}, outcome{201, policy.StopSuccess, true, 1}, true},
		// The first attempt times out whatever its timeout (its handler waits
		// at a gate); the asks that follow are answered at once, and have
		// 200 ms each: under load, 20 ms let an ask time out too, and the
		// stop was attempts-exhausted.
		{"attempt-timeout", func(s *writeService, p *policy.Policy, _ *hedge.Config, _ context.CancelFunc) {
			p.AttemptTimeout, p.Timeout = 200*time.Millisecond, 10*time.Second
			s.gate = s.served409
		}, outcome{201, policy.StopSuccess, true, 1}, false},
		{"deadline-first", func(s *writeService, p *policy.Policy, _ *hedge.Config, _ context.CancelFunc) {
			p.AttemptTimeout, p.Timeout = 200*time.Millisecond, time.Second // the first attempt times out well before the deadline
			s.gate = make(chan struct{})                                    // released once the caller has its answer
		}, outcome{0, policy.StopKeyInFlight, false, 1}, false},
		{"cancelled-while-asking", func(s *writeService, p *policy.Policy, _ *hedge.Config, cancel context.CancelFunc) {
			p.AttemptTimeout, p.Timeout = 200*time.Millisecond, 10*time.Second
			s.gate = make(chan struct{})
			s.on409 = cancel
		}, outcome{0, policy.StopCancelled, false, 1}, false},
		{"handler-panics", func(s *writeService, p *policy.Policy, _ *hedge.Config, _ context.CancelFunc) {
			s.panicFirst = true // its claim is released: the retry runs it
		}, outcome{201, policy.StopSuccess, false, 2}, false},
	}
	for _, proto := range []string{"h1", "h2c"} {
		for _, c := range cases {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				s := &writeService{served409: make(chan struct{}), wrote: make(chan struct{})}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				p := policy.Default()
				p.IdempotencyKeys, p.Backoff, p.Budget = true, policy.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}, nil
				hc := hedge.Config{Delay: time.Hour}
				c.setup(s, &p, &hc, cancel)

				ts, tr := rttest.Server(s.handler(), proto == "h2c", nil)
				defer ts.Close()
				defer tr.CloseIdleConnections()
				e, err := engine.New(engine.Config{Policy: p})
				if err != nil {
					t.Fatal(err)
				}
				st, err := middleware.NewStack(e.Layer(), hedge.Layer(hc))
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/orders", strings.NewReader(`{"item":1}`))
				resp, err := st.Then(tr).RoundTrip(req)
				var got outcome
				var rep *engine.Report
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					rep = engine.ReportOf(resp)
					got.status = resp.StatusCode
					if resp.StatusCode == 201 && (string(b) != `{"order":1}` || !strings.Contains(resp.Header.Get("Set-Cookie"), "order=1")) {
						t.Errorf("the answer %q, Set-Cookie %q: want the handler's", b, resp.Header.Get("Set-Cookie"))
					}
				} else {
					rep = engine.ReportFrom(err)
				}
				if rep == nil {
					t.Fatalf("no report: %v", err)
				}
				got.stop, got.replay = rep.Stop, rep.Replayed
				if s.gate != nil && s.gate != s.served409 {
					select {
					case <-s.gate:
					default:
						close(s.gate) // the write finishes after the caller gave up
					}
				}
				select {
				case <-s.wrote:
				case <-time.After(10 * time.Second): // a guard against a hang, not a verdict on time
					t.Fatal("the order was never written")
				}
				ts.Close()
				got.runs = s.runs.Load()
				if c.eitherReplay {
					got.replay = c.want.replay
				}
				if c.want.stop == policy.StopKeyInFlight && got.status == http.StatusConflict {
					// Time ran out during a wait (the last 409 is handed
					// back, as any answer the policy wanted to retry) or
					// during the last ask (an error): which, the clocks
					// decide.
					got.status = c.want.status
				}
				if got != c.want || s.writes.Load() != 1 {
					t.Errorf("got %+v, %d writes (%d requests; %v); want %+v and one write", got, s.writes.Load(), s.requests.Load(), rep, c.want)
				}
				if c.name == "hedged-default" && s.requests.Load() != 1 {
					t.Errorf("%d requests: a keyed POST was hedged", s.requests.Load())
				}
			})
		}
	}
}
