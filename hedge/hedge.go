package hedge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
)

// Config configures the hedging layer. The zero value sends one hedge
// after the 95th percentile of recent latencies (100 ms until 20 have been
// seen).
type Config struct {
	// Delay, when set, is the fixed wait before each hedge; otherwise the
	// wait is the Percentile of the latencies of recent sends.
	Delay time.Duration
	// Percentile is in (0, 1); 0 means 0.95.
	Percentile float64
	// Fallback is the wait until enough latencies have been seen; 0 means
	// 100 ms.
	Fallback time.Duration
	// MaxHedges is the most hedges per request, at most 10; 0 means 1.
	MaxHedges int
	// Safe picks the requests that may be hedged; nil means those of an
	// idempotent method, keyed or not (policy.Idempotent would add keyed
	// writes, whose hedges an idempotency server answers 409). A request
	// whose body cannot be replayed is never hedged.
	Safe func(*http.Request) bool
}

// Layer returns a hedging layer named "hedge". A bad Config makes the layer
// invalid: NewStack reports it.
func Layer(cfg Config) middleware.Layer {
	bad := configerr.For("hedge.Config.")
	var err error
	switch {
	case cfg.Delay < 0:
		err = bad("Delay", cfg.Delay, "must not be negative (0: wait for the Percentile of recent latencies)")
	case cfg.Fallback < 0:
		err = bad("Fallback", cfg.Fallback, "must not be negative (0: the default, 100ms)")
	case cfg.MaxHedges < 0 || cfg.MaxHedges > maxHedges:
		err = bad("MaxHedges", cfg.MaxHedges, fmt.Sprintf("must be between 0 and %d (0: the default, 1)", maxHedges))
	case cfg.Percentile < 0 || cfg.Percentile >= 1 || math.IsNaN(cfg.Percentile):
		err = bad("Percentile", cfg.Percentile, "must be in (0, 1), e.g. 0.95 (0: the default, 0.95)")
	}
	if err != nil {
		return middleware.Layer{Name: "hedge", Err: err}
	}
	if cfg.Percentile == 0 {
		cfg.Percentile = 0.95
	}
	if cfg.Fallback == 0 {
		cfg.Fallback = 100 * time.Millisecond
	}
	if cfg.MaxHedges == 0 {
		cfg.MaxHedges = 1
	}
	if cfg.Safe == nil {
		cfg.Safe = idempotentMethod
	}
	h := &hedger{cfg: cfg}
	return middleware.Layer{Name: "hedge", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &transport{h: h, next: wire.Base(next)}
	}}
}

// maxHedges bounds MaxHedges: more copies of one request than this is a
// storm of its own.
const maxHedges = 10

// hedger is a layer's state: its latency histogram.
type hedger struct {
	cfg  Config
	hist histogram
}

type transport struct {
	h    *hedger
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

// result is one send's outcome.
type result struct {
	n      int // 0 for the original, then the hedges
	resp   *http.Response
	err    error
	cancel context.CancelFunc
	panic  *sendPanic // the send panicked: resp and err are unset
}

// sendPanic is a panic on a send's goroutine, carried to the caller's.
type sendPanic struct{ value any }

// errGoexit is the panic value for a send whose goroutine ended through
// runtime.Goexit (a mock transport calling t.FailNow).
var errGoexit = errors.New("hedge: a send's goroutine exited (runtime.Goexit) without an answer")

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	h := t.h
	if !wire.Replayable(req) || !h.cfg.Safe(req) || req.Header.Get("Upgrade") != "" { // an upgrade is one connection's
		start := time.Now()
		resp, err := wire.RoundTrip(t.next, req)
		if err == nil {
			h.hist.add(time.Since(start))
		}
		return resp, err
	}
	start := time.Now()
	results := make(chan result, h.cfg.MaxHedges+1)
	send := func(n int, r *http.Request, cancel context.CancelFunc) {
		returned := false
		defer func() {
			if !returned {
				// A panic below happens on this goroutine: it is carried
				// to the caller's, which releases the other sends and
				// panics there, as it would without hedging.
				v := recover()
				if v == nil {
					v = errGoexit
				}
				results <- result{n: n, cancel: cancel, panic: &sendPanic{value: v}}
			}
		}()
		resp, err := wire.RoundTrip(t.next, r)
		returned = true
		results <- result{n: n, resp: resp, err: err, cancel: cancel}
	}
	op, _ := middleware.OperationOf(req.Context())
	timeoutHeader := op.TimeoutHeader() // the retry layer's above, restamped on each hedge

	ctx, cancel := context.WithCancel(req.Context())
	cancels := []context.CancelFunc{cancel} // every send's, by number
	starts := []time.Time{start}            // and when it began
	go send(0, req.WithContext(ctx), cancel)
	inFlight, sent := 1, 1
	timer := time.NewTimer(h.delay())
	defer timer.Stop()
	var (
		winner   *result
		lastErr  error
		panicked *sendPanic
		settled  bool
	)
	// release cancels every send but keep's (-1: every one) and waits for
	// those in flight, releasing their answers; it returns the first panic
	// among them.
	release := func(keep int) (p *sendPanic) {
		for i, c := range cancels {
			if i != keep {
				c()
			}
		}
		for ; inFlight > 0; inFlight-- {
			switch r := <-results; {
			case r.panic != nil:
				if p == nil {
					p = r.panic
				}
			case r.err == nil:
				wire.Discard(r.resp)
			}
		}
		return p
	}
	defer func() {
		if !settled {
			// A panic on this goroutine while hedging (a GetBody, a
			// budget, a Safe of the caller's): every send is cancelled and
			// released before the panic goes on.
			release(-1)
		}
	}()
	for winner == nil && panicked == nil && inFlight > 0 {
		select {
		case r := <-results:
			inFlight--
			if r.panic != nil {
				panicked = r.panic
				break
			}
			if r.err == nil {
				winner = &r
				break
			}
			// A failed send is no answer while another is in flight;
			// when every send failed, the last error is (the retry layer
			// above decides what to do with it).
			r.cancel()
			lastErr = r.err
		case <-timer.C:
			if sent > h.cfg.MaxHedges || req.Context().Err() != nil {
				continue
			}
			if b := op.Budget(); b != nil && !b.Withdraw() {
				continue // the retry budget is spent: no hedge
			}
			hr, hcancel, err := t.hedgeRequest(op, req, sent, timeoutHeader)
			if err != nil {
				continue
			}
			op.CountHedge(req.Context()) // its connection is not a send of the transport's own
			op.Emit(middleware.Event{Name: middleware.EventHedge, Attrs: []attribute.KeyValue{attribute.Int(protocol.AttrHedge, sent)}})
			cancels = append(cancels, hcancel)
			starts = append(starts, time.Now())
			go send(sent, hr, hcancel)
			inFlight++
			sent++
			timer.Reset(h.delay())
		}
	}
	settled = true
	// The losers: cancelled, and released once they return, before
	// RoundTrip does.
	keep := -1
	if winner != nil {
		keep = winner.n
	}
	if p := release(keep); panicked == nil {
		panicked = p
	}
	if panicked != nil {
		if winner != nil {
			wire.Discard(winner.resp)
			winner.cancel()
		}
		panic(panicked.value)
	}
	if winner == nil {
		return nil, lastErr
	}
	h.hist.add(time.Since(starts[winner.n])) // the winning send's own latency, not the hedge delay's
	if !new(wire.Watched[cancelOnDone]).Watch(winner.resp, cancelOnDone(winner.cancel)) {
		winner.cancel() // nothing left to read under it
	}
	return winner.resp, nil
}

// hedgeRequest is hedge n's copy of req, with its body replayed and a
// header of its own: the sends run at once, and a layer below may set
// headers on each (a signature, a date); the retry layer above restamps
// what depends on when it is sent.
func (t *transport) hedgeRequest(op middleware.Operation, req *http.Request, n int, timeoutHeader string) (*http.Request, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(op.WithHedge(req.Context(), n))
	r := req.WithContext(ctx)
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	protocol.Restamp(r, timeoutHeader)
	if wire.HasBody(req) {
		body, err := req.GetBody()
		if err != nil {
			cancel()
			return nil, nil, err
		}
		r.Body = body
	}
	return r, cancel, nil
}

// delay is the wait before the next hedge.
func (h *hedger) delay() time.Duration {
	if h.cfg.Delay > 0 {
		return h.cfg.Delay
	}
	if d, ok := h.hist.percentile(h.cfg.Percentile); ok {
		return d
	}
	return h.cfg.Fallback
}

// cancelOnDone ends the winner's context once its body is done.
type cancelOnDone context.CancelFunc

// BodyDone implements wire.Watcher.
func (c cancelOnDone) BodyDone(err error) error {
	c()
	return err
}

// histogram keeps recent latencies in logarithmic buckets (1 ms × 1.25ⁱ),
// halving every count each time minSamples × 50 have been added, so old
// latencies fade.
type histogram struct {
	mu      sync.Mutex
	counts  [buckets]float64
	total   float64
	samples int
}

const (
	buckets    = 64 // 1 ms to ~1.6 h
	minSamples = 20
)

func bucketOf(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return 0
	}
	return min(int(math.Log(ms)/math.Log(1.25))+1, buckets-1)
}

func upper(i int) time.Duration {
	return time.Duration(math.Pow(1.25, float64(i)) * float64(time.Millisecond))
}

func (h *histogram) add(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[bucketOf(d)]++
	h.total++
	h.samples++
	if h.samples >= minSamples*50 {
		for i := range h.counts {
			h.counts[i] /= 2
		}
		h.total /= 2
		h.samples = 0
	}
}

func (h *histogram) percentile(p float64) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total < minSamples {
		return 0, false
	}
	want := p * h.total
	var sum float64
	for i, c := range h.counts {
		sum += c
		if sum >= want {
			return upper(i), true
		}
	}
	return upper(buckets - 1), true
}

// idempotentMethod reports whether req's method is idempotent (RFC 9110
// §9.2.2), whatever its headers say.
func idempotentMethod(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete, "":
		return true
	}
	return false
}
