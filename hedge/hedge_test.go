package hedge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// slowFirst is a server whose first request stalls until the client gives
// up (or a long time), and whose others answer at once.
type slowFirst struct {
	requests  atomic.Int32
	cancelled atomic.Int32
}

func (s *slowFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	io.Copy(io.Discard, r.Body)
	if n == 1 {
		select {
		case <-r.Context().Done():
			s.cancelled.Add(1)
			return
		case <-time.After(10 * time.Second):
		}
	}
	w.Write([]byte("ok " + r.Method))
}

func client(t *testing.T, layers ...middleware.Layer) (*http.Client, *slowFirst, string) {
	t.Helper()
	s := &slowFirst{}
	srv := httptest.NewServer(s)
	st, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	return &http.Client{Transport: st.Then(tr)}, s, srv.URL
}

// A slow request is hedged after the delay; the hedge wins; the loser is
// cancelled before RoundTrip returns; the retry layer's report counts it.
func TestSlowRequestIsHedged(t *testing.T) {
	p := policy.Default()
	e, _ := engine.New(engine.Config{Policy: p})
	var events []string // the operation's, as a user's observer sees them
	var mu sync.Mutex
	observe := middleware.Layer{Name: "observe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			op.Observe(observerFunc(func(ev middleware.Event) {
				mu.Lock()
				defer mu.Unlock()
				for _, a := range ev.Attrs {
					events = append(events, ev.Name+" "+string(a.Key)+"="+a.Value.String())
				}
			}))
			return next.RoundTrip(req)
		})
	}}
	c, s, url := client(t, observe, e.Layer(), hedge.Layer(hedge.Config{Delay: 20 * time.Millisecond}))
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok GET" || s.requests.Load() != 2 {
		t.Errorf("body %q, %d requests; want ok GET, 2", b, s.requests.Load())
	}
	rep := engine.ReportOf(resp)
	if rep == nil || len(rep.Attempts) != 1 || rep.Attempts[0].Hedges != 1 || rep.Attempts[0].Transparent != 0 {
		t.Errorf("report %+v", rep)
	}
	mu.Lock()
	if !slices.Equal(events, []string{middleware.EventHedge + " retrystack.hedge=1"}) {
		t.Errorf("events %q, want the hedge's", events)
	}
	mu.Unlock()
	// The loser's server side saw its cancellation (the connection closed).
	deadline := time.Now().Add(5 * time.Second)
	for s.cancelled.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.cancelled.Load() != 1 {
		t.Error("the losing request was not cancelled")
	}
}

// A POST without a key, and a body that cannot be replayed, are never
// hedged.
func TestUnsafeIsNeverHedged(t *testing.T) {
	c, s, url := client(t, hedge.Layer(hedge.Config{Delay: 10 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("x"))
	if _, err := c.Do(req); err == nil {
		t.Error("the stalled POST answered")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second) // answered at once: generous for a loaded machine
	defer cancel2()
	req, _ = http.NewRequestWithContext(ctx2, "PUT", url, io.NopCloser(strings.NewReader("x"))) // no GetBody
	c.Do(req)
	if n := s.requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2: nothing hedged", n)
	}
}

// Hedges withdraw from the retry layer's budget: with none left, none is
// sent.
func TestHedgesShareTheRetryBudget(t *testing.T) {
	p := policy.Default()
	p.Budget = empty{}
	e, _ := engine.New(engine.Config{Policy: p})
	c, s, url := client(t, e.Layer(), hedge.Layer(hedge.Config{Delay: 10 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	c.Do(req)
	if n := s.requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1: the budget had nothing for a hedge", n)
	}
}

type empty struct{}

func (empty) Deposit()       {}
func (empty) Withdraw() bool { return false }

func TestContract(t *testing.T) {
	rttest.Contract(t, hedge.Layer(hedge.Config{Delay: time.Hour}).Wrap)
	rttest.Contract(t, hedge.Layer(hedge.Config{Delay: time.Nanosecond}).Wrap)
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []hedge.Config{{Delay: -1}, {Percentile: 1}, {MaxHedges: -1}, {MaxHedges: 11}} {
		if _, err := middleware.NewStack(hedge.Layer(cfg)); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

type observerFunc func(middleware.Event)

func (f observerFunc) Observe(e middleware.Event) { f(e) }

// A PUT whose body has no GetBody (an SDK's upload) is hedged too: the
// retry layer above keeps the body as it is sent and gives the request a
// GetBody from what it kept, so the hedge carries the whole body.
func TestStreamedBodyIsHedged(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if n.Add(1) == 1 {
			<-r.Context().Done() // the first stalls until the hedge wins
			return
		}
		w.Write([]byte("ok"))
	}))
	tr := &http.Transport{}
	defer func() { tr.CloseIdleConnections(); srv.Close() }()
	e, _ := engine.New(engine.Config{Policy: policy.Default()})
	st, _ := middleware.NewStack(e.Layer(), hedge.Layer(hedge.Config{Delay: 20 * time.Millisecond}))
	c := &http.Client{Transport: st.Then(tr)}
	body := strings.Repeat("upload ", 1000)
	req, _ := http.NewRequest("PUT", srv.URL, io.NopCloser(strings.NewReader(body)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rep := engine.ReportOf(resp); rep == nil || rep.Attempts[0].Hedges != 1 {
		t.Fatalf("report %v, want one hedge", rep)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		done := len(bodies) == 2
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[0] != body || bodies[1] != body {
		t.Errorf("the server received %d bodies of %v bytes, want 2 whole ones", len(bodies), func() (l []int) {
			for _, b := range bodies {
				l = append(l, len(b))
			}
			return
		}())
	}
}
