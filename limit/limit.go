package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/keyed"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Config configures a concurrency limit. Limit is required; the other
// fields' zero values are documented with them.
type Config struct {
	// Limit is the most requests in flight per key, at least 1: all the
	// time, or, with Adaptive, at the start.
	Limit int
	// Adaptive lets each key's limit move between MinLimit and MaxLimit,
	// from the latency of its answers (the package doc says how).
	// MinLimit 0 means 1, MaxLimit 0 means 1 000; both are errors
	// without Adaptive.
	Adaptive           bool
	MinLimit, MaxLimit int
	// MaxWait bounds a request's wait for room: 0 means as long as its
	// context allows (its deadline, or until it is cancelled); a negative
	// value refuses at once.
	MaxWait time.Duration
	// Key names the limit a request counts against; nil: its URL's host,
	// as the breaker keys circuits ("API.example.com" and
	// "api.example.com:443" are one host).
	Key func(*http.Request) string
	// MaxKeys bounds the keys remembered: 0 means 10 000. Past it, keys
	// with nothing in flight or waiting are forgotten (an adaptive key
	// starts again from Limit); keys in use are kept, so the bound can
	// be passed by as many keys as there are requests in flight.
	MaxKeys int
	// Now is the adaptive mode's clock; nil: time.Now.
	Now func() time.Time
}

// Layer returns a concurrency-limit layer named "limit". A bad Config
// makes the layer invalid: NewStack reports it, a *policy.ConfigError
// naming the field. The layer's keys are shared by every stack it is
// wrapped into, and safe for concurrent use; a refused request's body is
// closed, and an answer's body is the caller's, as without the layer.
func Layer(cfg Config) middleware.Layer {
	l, err := New(cfg)
	if err != nil {
		return middleware.Layer{Name: "limit", Err: err}
	}
	return l.Layer()
}

// Layer returns l as a layer named "limit"; every stack it is in shares
// l's keys.
func (l *Limiter) Layer() middleware.Layer {
	return middleware.Layer{Name: "limit", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &transport{l: l, next: wire.Base(next)}
	}}
}

// Limit is key's current limit, and the requests in flight against it:
// with Adaptive, where the latency of its answers has moved it. A key
// never seen, or forgotten, answers Config.Limit and 0, as it would start.
func (l *Limiter) Limit(key string) (limit, inFlight int) {
	k, ok := l.keys.Load(key)
	if !ok {
		return l.cfg.Limit, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.room(&l.cfg), k.inflight
}

const (
	defaultMaxKeys  = 10_000
	defaultMaxLimit = 1_000
)

// gaugeName is the gauge Instrument reports each key's current limit as.
const gaugeName = "retrystack.client.concurrency_limit"

// Instrument reports each key's current limit (Limit) as the gauge
// retrystack.client.concurrency_limit, in requests, with the attribute
// retrystack.limit.key, on a meter of mp (nil: OpenTelemetry's global provider),
// whenever the meter's reader collects. Unregister the registration when
// l is no longer used.
func (l *Limiter) Instrument(mp metric.MeterProvider) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/retrystack/retrystack/limit")
	g, err := m.Int64ObservableGauge(gaugeName, metric.WithUnit("{request}"),
		metric.WithDescription("Each key's concurrency limit now: fixed, or where the adaptive limit has moved it."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l.keys.Range(func(name string, k *key) bool {
			k.mu.Lock()
			limit := k.room(&l.cfg)
			k.mu.Unlock()
			o.ObserveInt64(g, int64(limit), metric.WithAttributes(attribute.String(protocol.AttrLimitKey, name)))
			return true
		})
		return nil
	}, g)
}

// New returns a concurrency limit for cfg, to wrap into stacks (Layer) and
// to read (Limit), or a *policy.ConfigError naming a bad field.
func New(cfg Config) (*Limiter, error) {
	bad := configerr.For("limit.Config.")
	switch {
	case cfg.Limit <= 0:
		return nil, bad("Limit", cfg.Limit, "must be at least 1 (the most requests in flight per key)")
	case cfg.MinLimit < 0:
		return nil, bad("MinLimit", cfg.MinLimit, "must not be negative")
	case cfg.MaxLimit < 0:
		return nil, bad("MaxLimit", cfg.MaxLimit, "must not be negative")
	case cfg.MaxKeys < 0:
		return nil, bad("MaxKeys", cfg.MaxKeys, "must not be negative")
	case !cfg.Adaptive && cfg.MinLimit != 0:
		return nil, bad("MinLimit", cfg.MinLimit, "bounds an adaptive limit only: set Adaptive")
	case !cfg.Adaptive && cfg.MaxLimit != 0:
		return nil, bad("MaxLimit", cfg.MaxLimit, "bounds an adaptive limit only: set Adaptive")
	}
	if cfg.Adaptive {
		if cfg.MinLimit == 0 {
			cfg.MinLimit = 1
		}
		if cfg.MaxLimit == 0 {
			cfg.MaxLimit = max(defaultMaxLimit, cfg.Limit)
		}
		switch {
		case cfg.MinLimit > cfg.MaxLimit:
			return nil, bad("MinLimit", cfg.MinLimit, fmt.Sprintf("must not be above MaxLimit (%d)", cfg.MaxLimit))
		case cfg.Limit < cfg.MinLimit || cfg.Limit > cfg.MaxLimit:
			return nil, bad("Limit", cfg.Limit, fmt.Sprintf("must be within MinLimit and MaxLimit (%d to %d)", cfg.MinLimit, cfg.MaxLimit))
		}
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = defaultMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Limiter{cfg: cfg}
	l.keys.Max = cfg.MaxKeys
	l.keys.Forget = func(k *key, force bool) bool {
		// Only a key with nothing in flight or waiting: the others hold
		// requests' places.
		if force {
			return false
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.inflight == 0 && k.firsts.len() == 0 && k.retries.len() == 0 {
			k.forgotten = true // a request that found it before finds the current one
			return true
		}
		return false
	}
	return l, nil
}

// A Limiter is one concurrency limit's keys. It is safe for concurrent
// use.
type Limiter struct {
	cfg  Config
	keys keyed.Map[*key]
}

// key is one key's limit: the requests in flight and those waiting, first
// attempts and retries apart.
type key struct {
	mu        sync.Mutex
	inflight  int
	limit     float64 // the current limit; fixed: Config.Limit
	firsts    queue
	retries   queue
	forgotten bool // removed from the limiter's map: admits nobody
	ad        adaptive
}

// room is how many requests k lets be in flight now.
func (k *key) room(cfg *Config) int {
	if !cfg.Adaptive {
		return cfg.Limit
	}
	if k.ad.probing {
		return cfg.MinLimit
	}
	return max(int(k.limit), 1)
}

// waiter is a request waiting for room. A waiter granted room holds a
// place in flight (inflight counts it) from the moment it is granted.
type waiter struct {
	ready   chan struct{}
	granted bool
}

// queue is a FIFO of waiters.
type queue struct{ ws []*waiter }

func (q *queue) push(w *waiter) { q.ws = append(q.ws, w) }
func (q *queue) len() int       { return len(q.ws) }

func (q *queue) pop() *waiter {
	w := q.ws[0]
	q.ws[0] = nil
	q.ws = q.ws[1:]
	if len(q.ws) == 0 {
		q.ws = q.ws[:0:0] // let the backing array go
	}
	return w
}

func (q *queue) remove(w *waiter) {
	for i, x := range q.ws {
		if x == w {
			q.ws = append(q.ws[:i], q.ws[i+1:]...)
			return
		}
	}
}

// admission is a request let in: when, and the adaptive generation that
// admitted it (a sample of an earlier generation does not count).
type admission struct {
	start  time.Time
	gen    uint64
	waited time.Duration // how long the request waited for room; 0 when it found some
}

// find returns name's key, making it, and making room for it, if it is
// missing.
func (l *Limiter) find(name string) *key {
	return l.keys.LoadOrMake(name, func() *key { return &key{limit: float64(l.cfg.Limit)} })
}

// errNoWait ends a wait that MaxWait bounds.
var errNoWait = errors.New("no room within MaxWait")

// acquire waits for room in name's key: it returns the key and the
// admission, or the refusal (or the caller's cancellation) that ended
// the wait.
func (l *Limiter) acquire(ctx context.Context, name string, retry bool) (*key, admission, error) {
	cfg := &l.cfg
	for {
		k := l.find(name)
		k.mu.Lock()
		if k.forgotten {
			k.mu.Unlock()
			continue
		}
		// A first attempt passes when there is room and no first attempt
		// waits; a retry, when nothing waits at all: retries wait behind
		// first attempts.
		waiting := k.firsts.len()
		if retry {
			waiting += k.retries.len()
		}
		if k.inflight < k.room(cfg) && waiting == 0 {
			adm := k.admit(cfg)
			k.mu.Unlock()
			return k, adm, nil
		}
		if cfg.MaxWait < 0 {
			lim := k.room(cfg)
			k.mu.Unlock()
			return nil, admission{}, &refusal{key: name, limit: lim}
		}
		w := &waiter{ready: make(chan struct{}, 1)}
		q := &k.firsts
		if retry {
			q = &k.retries
		}
		q.push(w)
		k.mu.Unlock()
		return l.wait(ctx, k, q, w, name)
	}
}

// admit counts a request in flight; k.mu is held.
func (k *key) admit(cfg *Config) admission {
	k.inflight++
	if !cfg.Adaptive {
		return admission{}
	}
	k.ad.peak = max(k.ad.peak, k.inflight)
	return admission{start: cfg.Now(), gen: k.ad.gen}
}

// wait waits for w to be granted room, until ctx ends or MaxWait passes.
func (l *Limiter) wait(ctx context.Context, k *key, q *queue, w *waiter, name string) (*key, admission, error) {
	cfg := &l.cfg
	start := time.Now()
	var timeout <-chan time.Time
	if cfg.MaxWait > 0 {
		t := time.NewTimer(cfg.MaxWait)
		defer t.Stop()
		timeout = t.C
	}
	var cause error
	select {
	case <-w.ready:
		adm := l.admitted(k)
		adm.waited = time.Since(start)
		return k, adm, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timeout:
		cause = errNoWait
	}
	k.mu.Lock()
	if w.granted {
		// Room came as the wait ended: the request has it, and goes on
		// (a context that ended fails it below, as it would have
		// failed in flight).
		k.mu.Unlock()
		<-w.ready
		adm := l.admitted(k)
		adm.waited = time.Since(start)
		return k, adm, nil
	}
	q.remove(w)
	lim := k.room(cfg)
	k.mu.Unlock()
	if errors.Is(cause, context.Canceled) {
		return nil, admission{}, cause // the caller's: not a refusal
	}
	return nil, admission{}, &refusal{key: name, limit: lim, waited: time.Since(start), cause: cause}
}

// admitted is the admission of a waiter granted room (inflight already
// counts it).
func (l *Limiter) admitted(k *key) admission {
	if !l.cfg.Adaptive {
		return admission{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return admission{start: l.cfg.Now(), gen: k.ad.gen}
}

// release gives back adm's place; sample says whether its latency counts
// for the adaptive limit.
func (l *Limiter) release(k *key, adm admission, sample bool) {
	cfg := &l.cfg
	k.mu.Lock()
	k.inflight--
	if cfg.Adaptive && sample {
		if now := cfg.Now(); adm.gen == k.ad.gen {
			k.ad.sample(cfg, &k.limit, now.Sub(adm.start), now)
		}
	}
	// Room goes to the waiters in order, first attempts before retries.
	for k.inflight < k.room(cfg) {
		var w *waiter
		switch {
		case k.firsts.len() > 0:
			w = k.firsts.pop()
		case k.retries.len() > 0:
			w = k.retries.pop()
		default:
			k.mu.Unlock()
			return
		}
		w.granted = true
		k.inflight++
		if cfg.Adaptive {
			k.ad.peak = max(k.ad.peak, k.inflight)
		}
		w.ready <- struct{}{}
	}
	k.mu.Unlock()
}

type transport struct {
	l    *Limiter
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

func (t *transport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	l := t.l
	name := ""
	if l.cfg.Key != nil {
		name = l.cfg.Key(req)
	} else {
		name = wire.HostKey(req.URL)
	}
	op, _ := middleware.OperationOf(req.Context())
	k, adm, err := l.acquire(req.Context(), name, op.Attempt() > 1)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // the RoundTripper's, even when it sends nothing
		}
		if r, ok := err.(*refusal); ok {
			if r.waited > 0 {
				op.MarkHeld(req.Context(), r.waited)
			}
			op.Emit(middleware.Event{Name: protocol.EventLimit, Attrs: []attribute.KeyValue{
				attribute.String(protocol.AttrLimitKey, name), attribute.Int(protocol.AttrLimit, r.limit),
				attribute.Float64(protocol.AttrLimitWaited, r.waited.Seconds())}})
		}
		return nil, err
	}
	if adm.waited > 0 {
		op.MarkHeld(req.Context(), adm.waited) // the retry layer above names the wait in the attempt's record
	}
	held := true
	defer func() {
		if held { // a panic below: the place is given back, counting for nothing
			l.release(k, adm, false)
		}
	}()
	resp, err = wire.RoundTrip(t.next, req)
	held = false
	l.release(k, adm, sample(req, resp, err))
	return resp, err
}

// sample reports whether a request's latency says how long the key's
// queue is: an answer does, but an overload answer (429, 503: a service
// that sheds load answers those fast); a timeout does; other failures
// and cancellations do not.
func sample(req *http.Request, resp *http.Response, err error) bool {
	if err != nil {
		return policy.KindOf(err) == policy.ErrorTimeout && req.Context().Err() != context.Canceled
	}
	return resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable
}

// refusal is the error of a request the limit refused: nothing was sent.
type refusal struct {
	key    string
	limit  int
	waited time.Duration
	cause  error // what ended the wait: the context's deadline, MaxWait; nil: no wait
}

func (e *refusal) Error() string {
	if e.cause == nil {
		return fmt.Sprintf("limit: %d requests in flight to %s, its limit: refused without waiting", e.limit, e.key)
	}
	return fmt.Sprintf("limit: %d requests in flight to %s, its limit: no room within %v (%v)", e.limit, e.key, e.waited.Round(time.Millisecond), e.cause)
}

// StopReason makes the error a policy.Refusal: a retry layer above stops
// with concurrency-limited.
func (e *refusal) StopReason() policy.StopReason { return policy.StopConcurrencyLimited }

// Unwrap returns what ended the wait: context.DeadlineExceeded when the
// request's deadline did.
func (e *refusal) Unwrap() error {
	if e.cause == errNoWait {
		return nil
	}
	return e.cause
}

// The adaptive controller's constants (the package doc explains them).
const (
	windowSamples = 16               // latency samples per window
	tolerance     = 1.25             // the latency over the minimum that is not a queue
	minGradient   = 0.5              // the most a window can cut the limit by
	maxGradient   = 2.0              // the most a window can grow it by (before the headroom)
	smoothing     = 0.5              // weight of a new window in the recent latency
	probeEvery    = 30 * time.Second // how often the minimum is measured again at MinLimit
)

// adaptive is a key's latency state: a gradient controller in the style
// of Envoy's adaptive concurrency filter.
type adaptive struct {
	minRTT, recent time.Duration // the sampled minimum; the smoothed recent latency
	sum            time.Duration // of the window so far
	n              int           // samples in the window so far
	peak           int           // the most in flight during the window
	probing        bool          // the window measures the minimum at MinLimit
	lastProbe      time.Time     // when the minimum was last measured at MinLimit; zero: never
	gen            uint64        // bumped when a probe starts: samples admitted before it do not count in it
}

// sample counts one latency; at the end of a window it moves *limit.
func (a *adaptive) sample(cfg *Config, limit *float64, rtt time.Duration, now time.Time) {
	a.sum += max(rtt, 0)
	a.n++
	if a.n < windowSamples {
		return
	}
	mean := a.sum / time.Duration(a.n)
	peak := a.peak
	a.sum, a.n, a.peak = 0, 0, 0
	if a.lastProbe.IsZero() {
		a.lastProbe = now // the first window: the next probe is due a period later
	}
	if a.probing {
		// The minimum, measured with MinLimit in flight: no queue of
		// ours in it.
		a.minRTT, a.probing, a.lastProbe = mean, false, now
		a.recent = mean
		return
	}
	if a.minRTT == 0 || mean < a.minRTT {
		a.minRTT = mean
	}
	if a.recent == 0 {
		a.recent = mean
	} else {
		a.recent += time.Duration(smoothing * float64(mean-a.recent))
	}
	if d := now.Sub(a.lastProbe); d >= probeEvery || d < 0 {
		// Measure the minimum again, at MinLimit, as Envoy does: a
		// minimum taken under load, or before the service slowed for
		// good, would hold the limit wrong for ever.
		a.probing = true
		a.gen++
		return
	}
	if a.recent <= 0 {
		return
	}
	g := tolerance * float64(a.minRTT) / float64(a.recent)
	g = min(max(g, minGradient), maxGradient)
	if g >= 1 && float64(peak) < *limit/2 {
		return // the key does not use the limit it has: no evidence for more
	}
	next := *limit * g
	next += math.Sqrt(next) // headroom: room for the queue that lets the latency be seen
	*limit = min(max(next, float64(cfg.MinLimit)), float64(cfg.MaxLimit))
}
