package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/internal/storekit"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
)

// FleetConfig configures a [Fleet].
type FleetConfig struct {
	// Name names the fleet: the processes that give one Name on one Redis
	// share one retry budget and one set of pacing holds. 1 to 64 letters,
	// digits and ".", "_", "-", ":" (the keys are
	// "retrystack:fleet:{Name}:b", ":c" and ":h"). Required.
	Name string
	// Interval is how often the fleet exchanges its counts and holds with
	// Redis: 0 means 100 ms; at least 10 ms, at most 10 s. A hold is sent
	// at once, without waiting for the interval.
	Interval time.Duration
	// Ratio and Burst are the budget's, as policy.NewEarnedBudget's (Ratio
	// from 1e-6 to 1, Burst from 1 to 1000): 0 means Default's (0.2 and
	// 2). Burst is per Fleet value (one a process,
	// usually): a fleet of N holds at most Burst·N retries plus Ratio of
	// the fleet's last second's successes. Give every process of a fleet
	// the same two: each exchange applies its own process's.
	Ratio float64
	Burst int
	// Scope names what a request's hold holds, when a fleet shares a rate
	// limit that is not the host's (one API token used by every process):
	// the requests for which Scope returns one string wait for each other's
	// holds, whatever their host. "" (or a nil Scope): the host. Redis
	// stores a SHA-256 of what Scope returns, never the string itself, but
	// return an account name or a hash rather than a secret. The engine's
	// own pacing (policy.RetryAfter.Pace) still holds the answering host
	// in the process that was answered.
	Scope func(*http.Request) string
	// Observer is told when the fleet stops sharing (event
	// retrystack.fleet.fallback: Redis failed, each process now decides
	// alone) and when it shares again (retrystack.fleet.shared). nil: no
	// one is told.
	Observer middleware.Observer
}

// The fleet's events, told to FleetConfig.Observer.
const (
	// EventFallback: an exchange with Redis failed; the process now uses
	// its local budget and its own pacing. Attributes: fleet.name,
	// error.type.
	EventFallback = "retrystack.fleet.fallback"
	// EventShared: an exchange succeeded after a fallback; the process
	// shares the fleet's budget and holds again. Attribute: fleet.name.
	EventShared = "retrystack.fleet.shared"
)

// Fleet is a retry budget and pacing holds that the processes of a fleet
// share through Redis: a policy.Budget (the fleet's successes pay for the
// fleet's retries, whichever process made them) and a policy.Pacer (a
// Retry-After that one process is answered holds them all). Set it as
// both:
//
//	p := policy.Default()
//	p.Budget = fleet
//	p.RetryAfter.Shared = fleet
//
// No request waits on Redis: a Fleet counts locally and exchanges its
// counts with Redis in the background, every Interval; it decides from the
// fleet's figures of the last exchange plus its own counts since. When an
// exchange fails it decides alone (the budget of policy.NewEarnedBudget,
// which it keeps fed) until one succeeds again. Close stops the exchange.
//
// The rules are NewEarnedBudget's, over the fleet's counts: a request that
// needed no retry earns Ratio of a retry; the stock is capped at Burst per
// process plus what the fleet's last second earned; retries of an
// operation that ended in success are paid back. A retry after an attempt
// that timed out is paid from the stock too, while the fleet's timeouts
// are rare (WithdrawAfterTimeout): a fleet, unlike one process, can tell a
// stall from a brown-out.
type Fleet struct {
	c        goredis.UniversalClient
	name     string
	keys     []string // budget hash, clients' sorted set, holds hash
	id       string   // this Fleet's, among the fleet's processes
	interval time.Duration
	timeout  time.Duration // of one exchange
	ratio    float64       // retries a success earns
	earn     int64         // credit per success, in millionths of a retry
	burst    int64         // the stock's floor cap per process, in millionths
	scope    func(*http.Request) string
	observer middleware.Observer

	local earnedBudget // NewEarnedBudget's: what a process decides alone

	// earned is credit that this process's successes earned since the
	// last exchange began: on the success path, so an atomic.
	earned atomic.Int64

	exchanging  sync.Mutex // one exchange at a time
	transitions sync.Mutex // a change of state and its event, one at a time: the Observer hears them in order

	mu       sync.Mutex
	fig      figure // the fleet's, at the last exchange
	pending  counts // since the last exchange began
	inflight counts // in the exchange under way
	sent     []sent // the counts of the exchanges of the last ownWindow
	liveTill int64  // until when (nanoseconds since start) fig may be used
	state    int    // starting, sharing or alone

	holds    sync.Map     // scope → time.Time: holds the fleet knows of
	nholds   atomic.Int64 // entries in holds: 0 skips the lookup
	newHolds []hold       // to send; guarded by mu

	now    func() time.Time // the process's clock (clock)
	start  time.Time
	nudge  chan struct{}
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// earnedBudget is what policy.NewEarnedBudget returns, with the optional
// methods the engine uses.
type earnedBudget interface {
	policy.Budget
	DepositAt(time.Time)
	WithdrawAfterTimeout() bool
	Refund()
	Retries() int
}

// figure is the fleet's state as Redis last answered it, in millionths of
// a retry.
type figure struct {
	stock  int64 // credit for retries, after this process's last counts
	recent int64 // credit the fleet earned in its last second, less what it spent of it
	active int64 // processes that exchanged in the last few seconds

	// successes and timeouts are the fleet's requests that needed no
	// retry and its attempts that timed out, in its last second: counts,
	// not credit; lately the same two in its last 100 to 200 ms.
	successes, timeouts int64
	lately              [2]int64
}

// counts is what this process did since an exchange, in millionths of a
// retry, for Redis to add to the fleet's figures.
type counts struct {
	earned, refunded, spent, charged int64
	timeouts                         int64 // attempts that timed out (a count)
}

// sent is what one exchange sent of this process's own counts, and when.
type sent struct {
	at                  int64 // nanoseconds since the Fleet started
	successes, timeouts int64
}

// ownWindow is how far back a process looks at its own successes and
// timeouts: short, so that a busy process sees a brown-out start in its
// own requests before the fleet's last second does.
const ownWindow = 200 * time.Millisecond

// hold is a hold to tell the fleet: its scope, and how long it lasts from
// when it is sent (a duration, not a time: the processes' clocks may
// disagree).
type hold struct {
	scope string
	until time.Time
}

// unit is one retry, as the budget counts it.
const unit = 1_000_000

const (
	starting = iota
	sharing
	alone
)

// The bounds of a Fleet's figures: an answer beyond them is not believed.
const (
	maxActive = 1_000_000            // processes in one fleet
	maxCredit = 1_000_000_000 * unit // a billion retries: Burst 1 000 for each of maxActive processes
	maxCount  = 1_000_000_000        // requests in a second
)

// The bounds of what a Fleet holds and sends.
const (
	maxHoldsSent  = 1000   // holds sent in one exchange, and read from one answer
	maxHolds      = 10_000 // scopes a process holds at once, as the engine's own pacing
	maxScopeBytes = 256    // a host longer than this is hashed too
)

// timeoutFloor is how many timeouts a second a fleet retries whatever its
// successes: a fleet of 20 processes of a request a second meets its
// stalls one by one, and a few more than Ratio of its successes in some
// seconds; two a second are nothing to a fleet of 1 000.
const timeoutFloor = 2

// NewFleet starts the exchange of a Fleet on c; Close stops it. The
// fleet's keys expire a minute after its last process stopped. A
// FleetConfig that is not valid is a *policy.ConfigError.
func NewFleet(c goredis.UniversalClient, cfg FleetConfig) (*Fleet, error) {
	if err := validFleetName(cfg.Name); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, &policy.ConfigError{Field: "redis.NewFleet(c)", Reason: "required: a go-redis client"}
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Interval < 10*time.Millisecond || cfg.Interval > 10*time.Second {
		return nil, &policy.ConfigError{Field: "redis.FleetConfig.Interval", Value: cfg.Interval, Reason: "must be between 10ms and 10s (0: 100ms)"}
	}
	if cfg.Ratio == 0 {
		cfg.Ratio = 0.2
	}
	if cfg.Burst == 0 {
		cfg.Burst = 2
	}
	local, err := policy.NewEarnedBudget(cfg.Ratio, cfg.Burst)
	if err != nil {
		var ce *policy.ConfigError
		if errors.As(err, &ce) {
			ce.Field = map[string]string{"policy.NewEarnedBudget(ratio)": "redis.FleetConfig.Ratio", "policy.NewEarnedBudget(burst)": "redis.FleetConfig.Burst"}[ce.Field]
		}
		return nil, err
	}
	tag := "retrystack:fleet:{" + cfg.Name + "}:" // one hash slot: a cluster runs the script on one node
	f := &Fleet{
		c: c, name: cfg.Name, keys: []string{tag + "b", tag + "c", tag + "h"}, id: storekit.Token(),
		interval: cfg.Interval, timeout: min(cfg.Interval, 500*time.Millisecond), ratio: cfg.Ratio, earn: int64(cfg.Ratio * unit), burst: int64(cfg.Burst) * unit,
		scope: cfg.Scope, observer: cfg.Observer, local: local.(earnedBudget),
		liveTill: int64(2 * cfg.Interval), // starting: the first exchange has two intervals
		now:      clock, start: time.Now(), nudge: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go f.run()
	return f, nil
}

// clock is the clock NewFleet's Fleets read: time.Now, but in a test of
// processes whose clocks disagree.
var clock = time.Now

// validFleetName reports a name NewFleet does not accept.
func validFleetName(name string) error {
	if name == "" || len(name) > 64 {
		return &policy.ConfigError{Field: "redis.FleetConfig.Name", Value: strconv.Quote(name), Reason: "must be 1 to 64 characters: letters, digits, '.', '_', '-', ':'"}
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			return &policy.ConfigError{Field: "redis.FleetConfig.Name", Value: strconv.Quote(name), Reason: "may hold only letters, digits, '.', '_', '-', ':' (it names Redis keys, and braces would move them to another slot)"}
		}
	}
	return nil
}

// Close stops the exchange with Redis: the Fleet then decides alone. It
// waits for an exchange under way, which ends at its timeout (the
// interval, at most 500 ms) when the client honours its context
// (go-redis's ContextTimeoutEnabled), else at the client's ReadTimeout.
// It returns nil.
func (f *Fleet) Close() error {
	f.closed.Do(func() { close(f.stop) })
	<-f.done
	return nil
}

// Sharing reports whether the Fleet's last exchange with Redis succeeded
// recently enough for it to decide from the fleet's figures.
func (f *Fleet) Sharing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live(f.since())
}

// since is the time since the Fleet started, on the monotonic clock.
func (f *Fleet) since() int64 { return int64(time.Since(f.start)) }

// live reports whether fig may be used at now; f.mu is held.
func (f *Fleet) live(now int64) bool { return f.state == sharing && now < f.liveTill }

// Deposit records a request that needed no retry.
func (f *Fleet) Deposit() { f.DepositAt(time.Time{}) }

// DepositAt is Deposit when the caller has just read the clock (now, with
// a monotonic reading, as time.Now's; the zero Time reads the clock), as
// policy.NewEarnedBudget's.
func (f *Fleet) DepositAt(now time.Time) {
	f.earned.Add(f.earn)
	f.local.DepositAt(now) // kept fed: a fallback starts where a local budget would be
}

// Withdraw pays for a retry from the fleet's stock, or, when the fleet's
// figures are not current, from the local budget.
func (f *Fleet) Withdraw() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live(f.since()) {
		return f.local.Withdraw()
	}
	recent, avail := f.credit()
	if avail < unit {
		return false
	}
	f.pending.spent += unit
	if recent >= unit {
		f.pending.charged += unit // the last second's credit pays too, as NewEarnedBudget's
	}
	return true
}

// WithdrawAfterTimeout pays for the retry of an attempt that timed out,
// from the stock as any retry, while timeouts are rare:
//
//   - in the fleet's last second, and in its last 200 ms, at most 2 plus
//     Ratio of its successes (this process's counts since its last
//     exchange included);
//   - in this process's own last 200 ms, at most 1 plus Ratio of its
//     successes.
//
// A healthy fleet thus retries a stall of any of its processes, however
// small; a brown-out makes timeouts common at once, and the fleet stops
// retrying them as soon as it hears of them (a busy process at once, from
// its own counts). A timeout is told to Redis at once, not at the next
// interval. A retry paid here is not paid back when the operation
// succeeds: the engine refunds only what Withdraw paid.
func (f *Fleet) WithdrawAfterTimeout() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live(f.since()) {
		return f.local.WithdrawAfterTimeout()
	}
	f.pending.timeouts++
	// The fleet hears of a timeout at once: it may be a brown-out's first.
	f.exchangeSoon()
	newTimeouts := f.pending.timeouts + f.inflight.timeouts // not yet in fig
	newSuccesses := (f.earned.Load() + f.inflight.earned) / f.earn
	ownTimeouts, ownSuccesses := newTimeouts, newSuccesses
	for _, c := range f.sent {
		ownTimeouts += c.timeouts
		ownSuccesses += c.successes
	}
	if float64(f.fig.timeouts+newTimeouts) > timeoutFloor+f.ratio*float64(f.fig.successes+newSuccesses) ||
		float64(f.fig.lately[1]+newTimeouts) > timeoutFloor+f.ratio*float64(f.fig.lately[0]+newSuccesses) ||
		float64(ownTimeouts) > 1+f.ratio*float64(ownSuccesses) {
		return false
	}
	recent, avail := f.credit()
	if avail < unit {
		return false
	}
	f.pending.spent += unit
	if recent >= unit {
		f.pending.charged += unit // as Withdraw
	}
	return true
}

// Refund pays back a retry of an operation that succeeded.
func (f *Fleet) Refund() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live(f.since()) {
		f.local.Refund()
		return
	}
	f.pending.refunded += unit
}

// Retries is how many retries after fast failures the budget would allow
// now, for telemetry.
func (f *Fleet) Retries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live(f.since()) {
		return f.local.Retries()
	}
	_, avail := f.credit()
	return int(max(avail, 0) / unit)
}

func (f *Fleet) String() string {
	how := "alone"
	if f.Sharing() {
		how = "shared"
	}
	return fmt.Sprintf("fleet budget(%s, %s, %d retries left)", f.name, how, f.Retries())
}

// credit is the fleet's last second's credit and the stock this process
// may spend now: the last figures plus its own counts since; f.mu is held.
func (f *Fleet) credit() (recent, avail int64) {
	earned := f.earned.Load() + f.inflight.earned
	refunded := f.pending.refunded + f.inflight.refunded
	spent := f.pending.spent + f.inflight.spent
	charged := f.pending.charged + f.inflight.charged
	recent = f.fig.recent + earned - charged
	limit := f.burst*f.fig.active + max(recent, 0)
	// Every process reads the same figure: between two exchanges each
	// spends at most its share of the fleet's stock, and what it earned
	// since, so that the fleet spends no more than its stock and its
	// processes' floors, however many they are.
	share := max(f.burst, f.fig.stock/f.fig.active)
	return recent, min(f.fig.stock+earned+refunded-spent, limit, share+earned+refunded-spent)
}

// Hold tells the fleet that req's host (or Scope) asked for no requests
// until until: this process waits for it at once, the others from their
// next exchange.
func (f *Fleet) Hold(req *http.Request, host string, until time.Time) {
	scope := f.scopeOf(req, host)
	f.holdLocally(scope, until)
	f.mu.Lock()
	if len(f.newHolds) < maxHoldsSent {
		f.newHolds = append(f.newHolds, hold{scope, until})
	}
	f.mu.Unlock()
	f.exchangeSoon()
}

// exchangeSoon starts an exchange now, or as soon as the one under way
// ends, instead of at the next interval.
func (f *Fleet) exchangeSoon() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// HeldUntil is until when the fleet holds requests such as req, to host:
// the zero time when it does not.
func (f *Fleet) HeldUntil(req *http.Request, host string) time.Time {
	if f.nholds.Load() == 0 {
		return time.Time{}
	}
	v, ok := f.holds.Load(f.scopeOf(req, host))
	if !ok {
		return time.Time{}
	}
	return v.(time.Time)
}

// scopeOf names the hold of req, to host, in this process: the host
// itself (no copy: HeldUntil runs on every attempt), "host#" and a digest
// of a host too long for a key, or "scope:" and a digest of what Scope
// returned. No host is spelt "scope:…" or "host#…" (a port is a number, a
// '#' ends a URL's host).
func (f *Fleet) scopeOf(req *http.Request, host string) string {
	if f.scope != nil {
		if s := f.scope(req); s != "" {
			return "scope:" + digest(s)
		}
	}
	if len(host) > maxScopeBytes {
		return "host#" + digest(host)
	}
	return host
}

// field is the holds hash's field of a scope of scopeOf's; unfield the
// scope of a field.
func field(scope string) string {
	if strings.HasPrefix(scope, "scope:") || strings.HasPrefix(scope, "host#") {
		return scope
	}
	return "host:" + scope
}

func unfield(f string) string { return strings.TrimPrefix(f, "host:") }

// digest is a short SHA-256 of s, in hex.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// holdLocally records that scope is held until until, unless it is
// already held longer. Past maxHolds scopes, a new one is not recorded.
func (f *Fleet) holdLocally(scope string, until time.Time) {
	for {
		old, loaded := f.holds.Load(scope)
		if !loaded {
			if f.nholds.Load() >= maxHolds {
				return
			}
			if _, loaded = f.holds.LoadOrStore(scope, until); !loaded {
				f.nholds.Add(1)
				return
			}
			continue
		}
		if !until.After(old.(time.Time)) || f.holds.CompareAndSwap(scope, old, until) {
			return
		}
	}
}

// forgetHolds drops the holds that ended before now.
func (f *Fleet) forgetHolds(now time.Time) {
	f.holds.Range(func(k, v any) bool {
		if !v.(time.Time).After(now) && f.holds.CompareAndDelete(k, v) {
			f.nholds.Add(-1)
		}
		return true
	})
}

// run exchanges with Redis every interval until Close, one exchange at a
// time; after a hold or a timeout (a nudge) sooner, but at most once a
// quarter interval: a brown-out's stream of timeouts is four exchanges an
// interval, not one each. An exchange that takes longer than its timeout
// (a client that does not honour its context: go-redis's
// ContextTimeoutEnabled is off by default) does not keep the process on
// stale figures: at each tick meanwhile it falls back once they are two
// intervals old.
func (f *Fleet) run() {
	defer close(f.done)
	quarter := f.interval / 4
	t := time.NewTicker(quarter)
	defer t.Stop()
	ended := make(chan struct{}, 1)
	var (
		busy    bool
		wanted  bool // nudged since the last exchange began
		ticks   int  // quarters since the last exchange began
		started time.Time
	)
	start := func() {
		busy, wanted, ticks, started = true, false, 0, time.Now()
		go func() { f.exchange(); ended <- struct{}{} }()
	}
	start()
	for {
		select {
		case <-f.stop:
			if busy {
				<-ended
			}
			return
		case <-ended:
			busy = false
			if wanted && time.Since(started) >= quarter {
				start()
			}
		case <-t.C:
			ticks++
			switch {
			case busy:
				f.fallBackIfStale()
			case wanted || ticks >= 4:
				start()
			}
		case <-f.nudge:
			wanted = true
			if !busy && time.Since(started) >= quarter {
				start()
			}
		}
	}
}

// fallBackIfStale makes the process decide alone, and says so, once its
// figures are two intervals old (or, starting, once its first exchange
// has taken two intervals).
func (f *Fleet) fallBackIfStale() {
	f.transitions.Lock()
	defer f.transitions.Unlock()
	f.mu.Lock()
	stale := f.state != alone && f.since() >= f.liveTill
	if stale {
		f.state = alone
	}
	f.mu.Unlock()
	if stale {
		f.tell(middleware.Event{Name: EventFallback, Attrs: []attribute.KeyValue{attribute.String("fleet.name", f.name), attribute.String("error.type", "timeout")}})
	}
}

// exchange sends this process's counts and holds and takes the fleet's
// figures and holds; a failure makes the process decide alone until an
// exchange succeeds.
func (f *Fleet) exchange() {
	f.exchanging.Lock()
	defer f.exchanging.Unlock()
	f.mu.Lock()
	f.inflight = f.pending
	f.inflight.earned = f.earned.Swap(0)
	f.pending = counts{}
	batch, holds := f.inflight, f.newHolds
	f.newHolds = nil
	f.mu.Unlock()

	// At most one interval, and never long: the figures are not used
	// once they are older than two anyway.
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	sentAt := f.now()
	fig, held, err := f.call(ctx, batch, holds, sentAt)

	f.transitions.Lock()
	defer f.transitions.Unlock()
	f.mu.Lock()
	now := f.since()
	f.sent = append(f.sent, sent{at: now, successes: batch.earned / f.earn, timeouts: batch.timeouts})
	for len(f.sent) > 0 && now-f.sent[0].at > int64(ownWindow) {
		f.sent = f.sent[1:]
	}
	f.inflight = counts{}
	was := f.state
	if err == nil {
		f.fig = fig
		f.liveTill = now + int64(2*f.interval)
		f.state = sharing
	} else {
		f.state = alone
	}
	f.mu.Unlock()

	for _, h := range held {
		f.holdLocally(h.scope, h.until)
	}
	f.forgetHolds(f.now()) // on every exchange: holds met while Redis fails end too
	switch {
	case err != nil && was != alone:
		f.tell(middleware.Event{Name: EventFallback, Attrs: []attribute.KeyValue{attribute.String("fleet.name", f.name), attribute.String("error.type", errorType(err))}})
	case err == nil && was == alone:
		f.tell(middleware.Event{Name: EventShared, Attrs: []attribute.KeyValue{attribute.String("fleet.name", f.name)}})
	}
}

func (f *Fleet) tell(e middleware.Event) {
	if f.observer != nil {
		f.observer.Observe(e)
	}
}

// errorType names an exchange's failure for EventFallback, without its
// text (an address, a password's error) in the attributes.
func errorType(err error) string {
	var bad *badAnswer
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &bad):
		return "bad-answer"
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // call's wrapping: the client's error
	}
	return fmt.Sprintf("%T", err)
}

// badAnswer is an answer from Redis that is not what the script returns.
type badAnswer struct{ why string }

func (e *badAnswer) Error() string { return "redis fleet: unexpected answer: " + e.why }
