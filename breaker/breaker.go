package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// State is a circuit's state.
type State uint8

const (
	Closed   State = iota // requests pass
	Open                  // requests fail at once
	HalfOpen              // a few probes pass
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Config configures a breaker. The zero value opens a host's circuit after
// 5 consecutive failures, for 5 s (+ up to 10 %), then lets 1 probe pass.
type Config struct {
	// Key names the circuit of a request; nil: its URL's host (with port).
	Key func(*http.Request) string
	// Consecutive failures open the circuit; 0 means 5, a negative value
	// turns this rule off.
	Consecutive int
	// Rate, when above 0, also opens the circuit when at least this share
	// of the calls of the last Window failed, once there were MinCalls.
	Rate     float64
	Window   time.Duration // 0 means 10 s
	MinCalls int           // 0 means 10
	// OpenFor is how long an open circuit fails requests at once; 0 means
	// 5 s. Jitter adds up to this share of it, at random; 0 means 0.1, a
	// negative value none.
	OpenFor time.Duration
	Jitter  float64
	// Probes is how many requests a half-open circuit lets through at
	// once, and how many must succeed to close it; 0 means 1. One failure
	// opens it again.
	Probes int
	// Failure decides whether a result counts against the circuit; nil: a
	// transport error other than a cancellation, or a 5xx. A deadline that
	// ends the request counts, whoever set it: a service slower than its
	// callers' deadlines is failing them (a caller with a very short
	// deadline can open a shared circuit; give such calls a Key of their
	// own).
	Failure func(resp *http.Response, err error) bool
	// OnChange is called, outside the breaker's locks, on each state
	// change.
	OnChange func(key string, from, to State)
	// Now and Rand are replaced by tests; nil: time.Now and math/rand/v2.
	Now  func() time.Time
	Rand func() float64
}

// OpenError is what a request gets when its circuit is open, or half-open
// with its probes in flight: nothing was sent. It matches the retry
// layer's stop reason circuit-open.
type OpenError struct {
	Key   string
	Until time.Time // when the open circuit lets a probe through; zero when half-open
}

func (e *OpenError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("breaker: circuit %q is half-open, its probes in flight", e.Key)
	}
	return fmt.Sprintf("breaker: circuit %q is open until %s", e.Key, e.Until.Format(time.RFC3339Nano))
}

// CircuitOpen reports true: how package policy recognises the error
// without importing this package.
func (e *OpenError) CircuitOpen() bool { return true }

// Breaker holds the circuits of one layer. It is safe for concurrent use.
type Breaker struct {
	cfg      Config
	mu       sync.RWMutex
	circuits map[string]*circuit
}

// New returns a breaker for cfg, or an error naming a bad field.
func New(cfg Config) (*Breaker, error) {
	switch {
	case !(cfg.Rate >= 0 && cfg.Rate <= 1): // NaN too
		return nil, fmt.Errorf("breaker: Rate %v is outside [0, 1]", cfg.Rate)
	case cfg.Window < 0, cfg.OpenFor < 0:
		return nil, errors.New("breaker: negative Window or OpenFor")
	case cfg.Window > 0 && cfg.Window < minWindow:
		return nil, fmt.Errorf("breaker: Window %v is below %v", cfg.Window, minWindow)
	case cfg.MinCalls < 0, cfg.Probes < 0:
		return nil, errors.New("breaker: negative MinCalls or Probes")
	case cfg.Jitter > 1 || math.IsNaN(cfg.Jitter):
		return nil, fmt.Errorf("breaker: Jitter %v is above 1", cfg.Jitter)
	}
	if cfg.Consecutive == 0 {
		cfg.Consecutive = 5
	}
	if cfg.Window == 0 {
		cfg.Window = 10 * time.Second
	}
	if cfg.MinCalls == 0 {
		cfg.MinCalls = 10
	}
	if cfg.OpenFor == 0 {
		cfg.OpenFor = 5 * time.Second
	}
	if cfg.Jitter == 0 {
		cfg.Jitter = 0.1
	}
	if cfg.Probes == 0 {
		cfg.Probes = 1
	}
	if cfg.Failure == nil {
		cfg.Failure = failure
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Breaker{cfg: cfg, circuits: map[string]*circuit{}}, nil
}

// Layer returns the breaker as a layer named "breaker". A bad Config
// makes the layer invalid: NewStack reports it.
func Layer(cfg Config) middleware.Layer {
	b, err := New(cfg)
	if err != nil {
		return middleware.Layer{Name: "breaker", Err: err}
	}
	return b.Layer()
}

// Layer returns b as a layer named "breaker"; every stack it is in shares
// b's circuits.
func (b *Breaker) Layer() middleware.Layer {
	return middleware.Layer{Name: "breaker", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &transport{b: b, next: wire.Base(next)}
	}}
}

// State returns the state of key's circuit.
func (b *Breaker) State(key string) State {
	c := b.lookup(key, false)
	if c == nil {
		return Closed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func failure(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	return resp.StatusCode >= 500
}

func (b *Breaker) key(req *http.Request) string {
	if b.cfg.Key != nil {
		return b.cfg.Key(req)
	}
	return req.URL.Host
}

func (b *Breaker) lookup(key string, create bool) *circuit {
	b.mu.RLock()
	c := b.circuits[key]
	b.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c = b.circuits[key]; c == nil {
		c = &circuit{buckets: make([]bucket, windowBuckets)}
		b.circuits[key] = c
	}
	return c
}

type transport struct {
	b    *Breaker
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b := t.b
	key := b.key(req)
	c := b.lookup(key, true)
	now := b.cfg.Now()
	probe, change, until, ok := c.admit(&b.cfg, now)
	b.changed(req.Context(), key, change)
	if !ok {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, sent or not
		}
		return nil, &OpenError{Key: key, Until: until}
	}
	resp, err := wire.RoundTrip(t.next, req)
	if err != nil && errors.Is(err, context.Canceled) && req.Context().Err() != nil {
		b.changed(req.Context(), key, c.release(probe)) // the caller's: neither success nor failure
		return nil, err
	}
	failed := b.cfg.Failure(resp, err)
	b.changed(req.Context(), key, c.record(&b.cfg, b.cfg.Now(), probe, failed))
	return resp, err
}

// changed reports a state change to the hook and the request's span.
func (b *Breaker) changed(ctx context.Context, key string, ch stateChange) {
	if ch.from == ch.to {
		return
	}
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(key, ch.from, ch.to)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventStateChange, trace.WithAttributes(
			attribute.String("retrystack.breaker.key", key),
			attribute.String("retrystack.breaker.from", ch.from.String()),
			attribute.String("retrystack.breaker.to", ch.to.String())))
	}
}

// EventStateChange is the span event of a state change.
const EventStateChange = "retrystack.breaker.state_change"

type stateChange struct{ from, to State }

const windowBuckets = 10

// minWindow is the shortest Window: its buckets must be at least 1 ms.
const minWindow = windowBuckets * time.Millisecond

type bucket struct {
	start          time.Time
	calls, failing int
}

// circuit is one key's state.
type circuit struct {
	mu          sync.Mutex
	state       State
	consecutive int
	openUntil   time.Time
	probes      int // in flight, half-open
	probed      int // probes that succeeded, half-open
	buckets     []bucket
}

// admit decides whether a request may pass; probe marks a half-open probe.
func (c *circuit) admit(cfg *Config, now time.Time) (probe bool, ch stateChange, until time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch = stateChange{c.state, c.state}
	if c.state == Open {
		if now.Before(c.openUntil) {
			return false, ch, c.openUntil, false
		}
		c.state, c.probes, c.probed = HalfOpen, 0, 0
		ch.to = HalfOpen
	}
	if c.state == HalfOpen {
		if c.probes >= cfg.Probes {
			return false, ch, time.Time{}, false
		}
		c.probes++
		return true, ch, time.Time{}, true
	}
	return false, ch, time.Time{}, true
}

// release gives back a probe whose result counts for nothing.
func (c *circuit) release(probe bool) stateChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	if probe && c.state == HalfOpen {
		c.probes--
	}
	return stateChange{c.state, c.state}
}

// record counts a result and returns the state change it caused.
func (c *circuit) record(cfg *Config, now time.Time, probe, failed bool) stateChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := stateChange{c.state, c.state}
	switch c.state {
	case HalfOpen:
		if !probe {
			return ch
		}
		c.probes--
		if failed {
			c.open(cfg, now)
		} else if c.probed++; c.probed >= cfg.Probes {
			c.state, c.consecutive = Closed, 0
			clear(c.buckets)
		}
	case Closed:
		c.count(cfg, now, failed)
		if failed {
			c.consecutive++
		} else {
			c.consecutive = 0
		}
		if (cfg.Consecutive > 0 && c.consecutive >= cfg.Consecutive) || c.rateExceeded(cfg, now) {
			c.open(cfg, now)
		}
	case Open: // a request admitted before the circuit opened
	}
	ch.to = c.state
	return ch
}

func (c *circuit) open(cfg *Config, now time.Time) {
	d := cfg.OpenFor
	if cfg.Jitter > 0 {
		d += time.Duration(cfg.Jitter * cfg.Rand() * float64(cfg.OpenFor))
	}
	c.state, c.openUntil, c.consecutive = Open, now.Add(d), 0
}

// count adds a call to the window's current bucket.
func (c *circuit) count(cfg *Config, now time.Time, failed bool) {
	if cfg.Rate <= 0 {
		return
	}
	width := cfg.Window / windowBuckets
	start := now.Truncate(width)
	i := int(start.UnixNano()/int64(width)) % windowBuckets
	if !c.buckets[i].start.Equal(start) {
		c.buckets[i] = bucket{start: start}
	}
	c.buckets[i].calls++
	if failed {
		c.buckets[i].failing++
	}
}

func (c *circuit) rateExceeded(cfg *Config, now time.Time) bool {
	if cfg.Rate <= 0 {
		return false
	}
	calls, failing := 0, 0
	for _, b := range c.buckets {
		if now.Sub(b.start) < cfg.Window {
			calls += b.calls
			failing += b.failing
		}
	}
	return calls >= cfg.MinCalls && float64(failing) >= cfg.Rate*float64(calls)
}
