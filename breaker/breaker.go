package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/keyed"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
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
	// change, in the order the changes happened (a circuit's changes
	// are delivered one at a time, by whichever request finds them
	// waiting).
	OnChange func(key string, from, to State)
	// MaxCircuits bounds how many circuits the breaker keeps; 0 means
	// 10 000. A closed circuit with nothing in flight and no
	// failure to remember is forgotten whenever room is needed (it is the
	// same as a new one); when that is not enough, a circuit with nothing
	// in flight is forgotten at random. Circuits with requests in flight
	// are kept, so the bound can be passed by as many keys as there are
	// requests in flight.
	MaxCircuits int
	// Now and Rand are replaced by tests; nil: time.Now and math/rand/v2.
	Now  func() time.Time
	Rand func() float64
}

// defaultMaxCircuits is the most circuits a breaker keeps when
// Config.MaxCircuits is 0.
const defaultMaxCircuits = 10_000

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

// StopReason makes the error a policy.Refusal: a retry layer above stops
// with circuit-open, sending nothing more.
func (e *OpenError) StopReason() policy.StopReason { return policy.StopCircuitOpen }

// Breaker holds the circuits of one layer. It is safe for concurrent use.
type Breaker struct {
	cfg      Config
	circuits keyed.Map[*circuit]
	added    atomic.Int64 // circuits made since the last sweep, about
}

// New returns a breaker for cfg, or a *policy.ConfigError naming a bad
// field, its value and the values it accepts.
func New(cfg Config) (*Breaker, error) {
	bad := configerr.For("breaker.Config.")
	switch {
	case !(cfg.Rate >= 0 && cfg.Rate <= 1): // NaN too
		return nil, bad("Rate", cfg.Rate, "must be between 0 and 1 (0: no rate rule; 0.5 opens at half the calls failing)")
	case cfg.Window < 0:
		return nil, bad("Window", cfg.Window, "must not be negative (0: the default, 10s)")
	case cfg.OpenFor < 0:
		return nil, bad("OpenFor", cfg.OpenFor, "must not be negative (0: the default, 5s)")
	case cfg.Window > 0 && cfg.Window < minWindow:
		return nil, bad("Window", cfg.Window, fmt.Sprintf("must be at least %v (0: the default, 10s)", minWindow))
	case cfg.MinCalls < 0:
		return nil, bad("MinCalls", cfg.MinCalls, "must not be negative (0: the default, 10)")
	case cfg.Probes < 0:
		return nil, bad("Probes", cfg.Probes, "must not be negative (0: the default, 1)")
	case cfg.MaxCircuits < 0:
		return nil, bad("MaxCircuits", cfg.MaxCircuits, "must not be negative (0: the default, 10 000)")
	case cfg.Jitter > 1 || math.IsNaN(cfg.Jitter):
		return nil, bad("Jitter", cfg.Jitter, "must be at most 1 (0: the default, 0.1; negative: none)")
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
	if cfg.MaxCircuits == 0 {
		cfg.MaxCircuits = defaultMaxCircuits
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
	b := &Breaker{cfg: cfg}
	b.circuits.Max = cfg.MaxCircuits
	b.circuits.Forget = func(c *circuit, force bool) bool {
		// Past the bound: the circuits with nothing to remember first,
		// then any with nothing in flight.
		if force {
			return c.forgetIf(func(c *circuit) bool { return c.inflight == 0 })
		}
		return c.forgetIf(func(c *circuit) bool { return c.idle(&b.cfg, b.cfg.Now()) })
	}
	return b, nil
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
	c, ok := b.circuits.Load(key)
	if !ok {
		return Closed // never seen, or forgotten: a new circuit is closed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// refused reports whether err is a layer below refusing to send: a
// policy.Refusal.
func refused(err error) bool {
	_, ok := errors.AsType[policy.Refusal](err)
	return ok
}

func failure(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	return resp.StatusCode >= 500
}

// key names req's circuit. The default is the URL's host as a server
// would see it: "API.example.com", "api.example.com" and
// "api.example.com:443" (for https) are one circuit.
func (b *Breaker) key(req *http.Request) string {
	if b.cfg.Key != nil {
		return b.cfg.Key(req)
	}
	return wire.HostKey(req.URL)
}

// admit finds key's circuit and admits one request to it: a circuit
// found but forgotten meanwhile is not used.
func (b *Breaker) admit(key string, now time.Time) (*circuit, admission, stateChange, time.Time, bool) {
	for {
		c := b.circuit(key, now)
		if adm, ch, until, ok, live := c.admit(&b.cfg, now); live {
			return c, adm, ch, until, ok
		}
	}
}

// circuit returns key's circuit, making it if it is missing. Every so
// often a new circuit first sweeps away the circuits that are the same as
// new ones, the cost spread over the circuits made since the last sweep,
// so that keys that come and go are forgotten before the bound is
// reached.
func (b *Breaker) circuit(key string, now time.Time) *circuit {
	if c, ok := b.circuits.Load(key); ok {
		return c
	}
	if b.added.Add(1) >= int64(b.circuits.Len()/2+64) {
		b.added.Store(0)
		b.circuits.Sweep(func(c *circuit) bool {
			return c.forgetIf(func(c *circuit) bool { return c.idle(&b.cfg, now) })
		})
	}
	return b.circuits.LoadOrMake(key, func() *circuit { return new(circuit) })
}

// forgetIf marks c forgotten, under its lock, if may says it can go: a
// request that found it before then finds its successor.
func (c *circuit) forgetIf(may func(*circuit) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if may(c) {
		c.forgotten = true
		return true
	}
	return false
}

type transport struct {
	b    *Breaker
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

func (t *transport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	var (
		c      *circuit
		adm    admission
		held   bool              // adm is neither recorded nor released
		unsent = req.Body != nil // req.Body is this layer's to close
		done   bool
	)
	defer func() {
		if done {
			return
		}
		// A panic (below the layer, in OnChange, in Key or Failure): an
		// admitted request gives its place back, counting for nothing, or
		// a half-open circuit would keep its probe slot for ever; a body
		// never passed on is closed, an answer nobody will get too.
		if held {
			c.release(adm)
		}
		if unsent {
			req.Body.Close()
		}
		if resp != nil {
			resp.Body.Close()
		}
	}()
	b := t.b
	key := b.key(req)
	c, adm, change, until, ok := b.admit(key, b.cfg.Now())
	held = ok
	if !ok {
		if unsent {
			req.Body.Close() // a RoundTripper closes the body, sent or not
			unsent = false
		}
		b.changed(req.Context(), c, key, change)
		done = true
		return nil, &OpenError{Key: key, Until: until}
	}
	b.changed(req.Context(), c, key, change)
	unsent = false
	resp, err = wire.RoundTrip(t.next, req)
	if err != nil && (req.Context().Err() == context.Canceled || refused(err)) {
		// The caller's, whatever the error says (net/http returns the
		// cancellation's cause), or a refusal by a layer below (a
		// concurrency limit): nothing was asked of the service, so
		// neither success nor failure.
		held = false
		c.release(adm)
		done = true
		return nil, err
	}
	ch := c.record(&b.cfg, b.cfg.Now(), adm, b.cfg.Failure(resp, err))
	held = false
	b.changed(req.Context(), c, key, ch)
	done = true
	return resp, err
}

// changed reports a state change to the request's operation, as an event
// its observers see (telemetry: a span event and a metric), and any
// waiting change of c's to the hook.
func (b *Breaker) changed(ctx context.Context, c *circuit, key string, ch stateChange) {
	if ch.from == ch.to {
		return
	}
	if b.cfg.OnChange != nil {
		c.report(key, b.cfg.OnChange)
	}
	if op, ok := middleware.OperationOf(ctx); ok {
		op.Emit(middleware.Event{Name: middleware.EventBreakerChange, Attrs: []attribute.KeyValue{
			attribute.String(protocol.AttrBreakerKey, key),
			attribute.String(protocol.AttrBreakerFrom, ch.from.String()),
			attribute.String(protocol.AttrBreakerTo, ch.to.String())}})
	}
}

type stateChange struct{ from, to State }

const windowBuckets = 10

// minWindow is the shortest Window: its buckets must be at least 1 ms.
const minWindow = windowBuckets * time.Millisecond

// circuit is one key's state.
type circuit struct {
	mu          sync.Mutex
	state       State
	period      uint64 // bumped by every state change: an admission counts only in its own period
	consecutive int
	openUntil   time.Time
	probes      int  // in flight, half-open
	probed      int  // probes that succeeded, half-open
	inflight    int  // admitted, not yet recorded or released
	forgotten   bool // removed from the breaker's map: admits nobody
	window      window

	// Changes waiting for OnChange, in order, and whether a request is
	// delivering them.
	pending   []stateChange
	reporting bool
}

// An admission is one request let through, and the period that let it.
type admission struct {
	period uint64
	probe  bool // a half-open probe
}

// admit decides whether a request may pass. live is false for a circuit
// forgotten meanwhile: the request must find the current one.
func (c *circuit) admit(cfg *Config, now time.Time) (adm admission, ch stateChange, until time.Time, ok, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgotten {
		return adm, ch, until, false, false
	}
	ch = stateChange{c.state, c.state}
	if c.state == Open {
		if now.Before(c.openUntil) {
			return adm, ch, c.openUntil, false, true
		}
		c.set(cfg, HalfOpen)
		c.probes, c.probed = 0, 0
		ch.to = HalfOpen
	}
	if c.state == HalfOpen {
		if c.probes >= cfg.Probes {
			return adm, ch, time.Time{}, false, true
		}
		c.probes++
		adm.probe = true
	}
	c.inflight++
	adm.period = c.period
	return adm, ch, time.Time{}, true, true
}

// set moves c to state, starting a new period, and queues the change for
// OnChange.
func (c *circuit) set(cfg *Config, state State) {
	if cfg.OnChange != nil {
		c.pending = append(c.pending, stateChange{c.state, state})
	}
	c.state = state
	c.period++
}

// release gives back an admission whose result counts for nothing.
func (c *circuit) release(adm admission) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	if adm.probe && adm.period == c.period {
		c.probes--
	}
}

// record counts a result and returns the state change it caused. A result
// of an earlier period (admitted before the circuit last changed) changes
// nothing: it neither frees a probe slot of the new period nor counts in it.
func (c *circuit) record(cfg *Config, now time.Time, adm admission, failed bool) stateChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	ch := stateChange{c.state, c.state}
	if adm.period != c.period {
		return ch
	}
	switch c.state {
	case HalfOpen:
		c.probes--
		if failed {
			c.open(cfg, now)
		} else if c.probed++; c.probed >= cfg.Probes {
			c.set(cfg, Closed)
			c.consecutive = 0
			c.window = window{}
		}
	case Closed:
		if cfg.Rate > 0 {
			c.window.count(cfg.Window, now, failed)
		}
		if failed {
			c.consecutive++
		} else {
			c.consecutive = 0
		}
		if (cfg.Consecutive > 0 && c.consecutive >= cfg.Consecutive) || c.rateExceeded(cfg, now) {
			c.open(cfg, now)
		}
	}
	ch.to = c.state
	return ch
}

func (c *circuit) open(cfg *Config, now time.Time) {
	c.set(cfg, Open)
	c.openUntil, c.consecutive = now.Add(openFor(cfg)), 0
}

// openFor is OpenFor plus its jitter, whatever Rand returns and however
// long OpenFor is.
func openFor(cfg *Config) time.Duration {
	if cfg.Jitter <= 0 {
		return cfg.OpenFor
	}
	r := cfg.Rand()
	if !(r > 0) { // NaN too
		return cfg.OpenFor
	}
	j := cfg.Jitter * min(r, 1) * float64(cfg.OpenFor)
	if j >= float64(math.MaxInt64-cfg.OpenFor) {
		return math.MaxInt64
	}
	return cfg.OpenFor + time.Duration(j)
}

func (c *circuit) rateExceeded(cfg *Config, now time.Time) bool {
	if cfg.Rate <= 0 {
		return false
	}
	calls, failing := c.window.sum(cfg.Window, now)
	return calls >= cfg.MinCalls && float64(failing) >= cfg.Rate*float64(calls)
}

// idle reports whether c is the same as a new circuit: closed, nothing in
// flight, no failure it would remember.
func (c *circuit) idle(cfg *Config, now time.Time) bool {
	if c.state != Closed || c.inflight > 0 || c.consecutive > 0 || c.reporting || len(c.pending) > 0 {
		return false
	}
	_, failing := c.window.sum(cfg.Window, now)
	return failing == 0
}

// report delivers c's waiting changes to onChange in order, outside c's
// lock, unless another request is delivering them already. An onChange
// that panics leaves the rest to the next report.
func (c *circuit) report(key string, onChange func(key string, from, to State)) {
	c.mu.Lock()
	if c.reporting {
		c.mu.Unlock()
		return
	}
	c.reporting = true
	for len(c.pending) > 0 {
		ch := c.pending[0]
		c.pending = c.pending[1:]
		c.mu.Unlock()
		c.deliver(key, onChange, ch)
		c.mu.Lock()
	}
	c.pending, c.reporting = nil, false
	c.mu.Unlock()
}

// deliver calls onChange outside c's lock; if it panics, c can report
// again.
func (c *circuit) deliver(key string, onChange func(key string, from, to State), ch stateChange) {
	done := false
	defer func() {
		if !done {
			c.mu.Lock()
			c.reporting = false
			c.mu.Unlock()
		}
	}()
	onChange(key, ch.from, ch.to)
	done = true
}

// window counts the calls and failures of about the last Window in
// windowBuckets buckets, the newest at head. Any clock value works: one
// that stands still, starts at the zero time or goes back (its calls
// count in the newest bucket).
type window struct {
	buckets [windowBuckets]bucket
	head    int
	start   time.Time // the head bucket's
	started bool
}

type bucket struct{ calls, failing int }

// roll makes now's bucket the head, clearing the buckets it passes.
func (w *window) roll(size time.Duration, now time.Time) {
	width := size / windowBuckets
	if !w.started {
		w.start, w.started = now, true
		return
	}
	d := now.Sub(w.start) // saturates: never overflows
	if d < width {
		return
	}
	steps := d / width
	if steps >= windowBuckets {
		w.buckets, w.start = [windowBuckets]bucket{}, now
		return
	}
	for range steps {
		w.head = (w.head + 1) % windowBuckets
		w.buckets[w.head] = bucket{}
	}
	w.start = w.start.Add(steps * width)
}

func (w *window) count(size time.Duration, now time.Time, failed bool) {
	w.roll(size, now)
	w.buckets[w.head].calls++
	if failed {
		w.buckets[w.head].failing++
	}
}

func (w *window) sum(size time.Duration, now time.Time) (calls, failing int) {
	w.roll(size, now)
	for _, b := range w.buckets {
		calls += b.calls
		failing += b.failing
	}
	return calls, failing
}
