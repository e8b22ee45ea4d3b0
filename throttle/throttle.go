package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/keyed"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
)

// Config configures the throttling layer. The zero value is the SRE
// book's: K 2, a window of 2 minutes.
type Config struct {
	// K is how many times what a host accepts the client may send it
	// before refusing locally: 0 means 2; below 1 is an error (the client
	// would refuse what the host accepts).
	K float64
	// Window is how far back requests and accepts count: 0 means 2
	// minutes; below 1s (or negative) is an error.
	Window time.Duration
	// Overloaded says whether an answer is the host rejecting for
	// overload; nil: a 429 or 503, or a transport error other than a
	// cancellation (refused, reset, timed out).
	Overloaded func(resp *http.Response, err error) bool
	// MaxHosts bounds the hosts remembered: 0 means 10 000. Past it,
	// hosts with nothing in the window are forgotten first.
	MaxHosts int
	// Now is the clock; nil: the monotonic clock. A clock that jumps
	// changes no decision for longer than the window.
	Now func() time.Time
	// Rand returns a number in [0, 1) for each decision; nil: math/rand/v2.
	Rand func() float64
}

// buckets divide the window: a request counts until the window has moved
// past its bucket.
const buckets = 12

// Layer returns a throttling layer named "throttle". A bad Config makes
// the layer invalid: NewStack reports it.
func Layer(cfg Config) middleware.Layer {
	switch {
	case cfg.K != 0 && (cfg.K < 1 || math.IsNaN(cfg.K) || math.IsInf(cfg.K, 0)):
		return middleware.Layer{Name: "throttle", Err: &policy.ConfigError{Field: "throttle.Config.K", Value: cfg.K, Reason: "must be at least 1 (0: the default, 2)"}}
	case cfg.Window < 0 || (cfg.Window > 0 && cfg.Window < time.Second):
		return middleware.Layer{Name: "throttle", Err: &policy.ConfigError{Field: "throttle.Config.Window", Value: cfg.Window, Reason: "must be 0 (the default, 2m) or at least 1s: a shorter window holds the 10 requests a host is judged on only at hundreds of requests a second"}}
	case cfg.MaxHosts < 0:
		return middleware.Layer{Name: "throttle", Err: &policy.ConfigError{Field: "throttle.Config.MaxHosts", Value: cfg.MaxHosts, Reason: "must not be negative (0: the default, 10 000)"}}
	}
	if cfg.K == 0 {
		cfg.K = 2
	}
	if cfg.Window == 0 {
		cfg.Window = 2 * time.Minute
	}
	if cfg.Overloaded == nil {
		cfg.Overloaded = overloaded
	}
	if cfg.MaxHosts == 0 {
		cfg.MaxHosts = 10_000
	}
	if cfg.Now == nil {
		// The wall clock's time, moved on by the monotonic clock: an NTP
		// step or a resumed VM does not move the window.
		start := time.Now()
		cfg.Now = func() time.Time { return start.Add(time.Since(start)) }
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	th := &throttle{cfg: cfg, width: max(int64(cfg.Window/buckets), 1)}
	th.hosts.Max = cfg.MaxHosts
	th.hosts.Forget = func(h *host, force bool) bool {
		// Past the bound: idle hosts first, then any (forgotten, as if
		// they were new).
		return force || h.idle(th.period(th.cfg.Now()))
	}
	return middleware.Layer{Name: "throttle", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &transport{th: th, next: wire.Base(next)}
	}}
}

func overloaded(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// throttle is a layer's state: the hosts' windows.
type throttle struct {
	cfg   Config
	width int64            // of a bucket, in ns
	hosts keyed.Map[*host] // by host key
}

// host is one host's window: requests and accepts per bucket, without a
// lock (an accept path of atomic adds). At a bucket's turn a count made
// by a racing request may be lost: the probability is an estimate.
type host struct {
	latest atomic.Int64 // the latest period a request started in

	tick [buckets]atomic.Int64 // the bucket's period (time / width); a bucket of another period is empty
	reqs [buckets]atomic.Int64 // sent and finished
	accs [buckets]atomic.Int64
	refs [buckets]atomic.Int64 // refused locally
}

// period is t's bucket period: floor division, so a clock before 1970
// works too.
func (th *throttle) period(t time.Time) int64 {
	ns := t.UnixNano()
	p := ns / th.width
	if ns%th.width < 0 {
		p--
	}
	return p
}

// slot is p's bucket index.
func slot(p int64) int {
	i := int(p % buckets)
	if i < 0 {
		i += buckets
	}
	return i
}

// turn makes bucket i period p's, emptying it, when it holds an older
// period; it reports whether the bucket is p's (false: it holds a newer
// one, and a count for p is too old to keep).
func (h *host) turn(i int, p int64) bool {
	for {
		old := h.tick[i].Load()
		switch {
		case old == p:
			return true
		case old > p:
			return false
		case h.tick[i].CompareAndSwap(old, p):
			h.reqs[i].Store(0)
			h.accs[i].Store(0)
			h.refs[i].Store(0)
			return true
		}
	}
}

// at notes that a request starts at period p. A period a window or more
// before the latest means the clock went back: the window is emptied
// (what it holds is no guide now, and until the clock caught up its
// buckets would look newer than every request), so that a jump changes
// no decision for longer than a window.
func (h *host) at(p int64) {
	l := h.latest.Load()
	switch {
	case p > l:
		h.latest.CompareAndSwap(l, p)
	case l-p >= buckets && h.latest.CompareAndSwap(l, p):
		h.empty()
	}
}

// empty marks every bucket of h as holding no period.
func (h *host) empty() {
	for i := range h.tick {
		h.tick[i].Store(math.MinInt64)
	}
}

// probability is the chance of refusing a request at period p, from the
// window's requests and accepts. Below minRequests nothing is refused: a
// host the client has just started to call, or calls rarely, is not
// judged on one or two answers. A bucket's local refusals count as
// requests only if the host rejected some of what it was sent in it: once
// it accepts everything again, the client's own refusals do not hold its
// rate down for windows more.
func (h *host) probability(p int64, k float64) float64 {
	var reqs, accs int64
	for i := range buckets {
		if d := p - h.tick[i].Load(); d >= 0 && d < buckets {
			sent, acc := h.reqs[i].Load(), h.accs[i].Load()
			reqs += sent
			accs += acc
			if sent > acc {
				reqs += h.refs[i].Load()
			}
		}
	}
	if reqs < minRequests || float64(reqs) <= k*float64(accs) {
		return 0 // the common case, without a division
	}
	return (float64(reqs) - k*float64(accs)) / float64(reqs+1)
}

// count counts a request that has finished, in period p's bucket (the
// period it started in), with its accept if it was one. Requests in
// flight do not count: a burst to a healthy host is not refused for
// answers it has not given yet.
func (h *host) count(p int64, accepted bool) {
	i := slot(p)
	if !h.turn(i, p) {
		return // it started a window ago or more
	}
	h.reqs[i].Add(1)
	if accepted {
		h.accs[i].Add(1)
	}
}

// refused counts a request refused locally, in period p's bucket.
func (h *host) refused(p int64) {
	if i := slot(p); h.turn(i, p) {
		h.refs[i].Add(1)
	}
}

// minRequests is the fewest requests in the window for a host to be
// throttled.
const minRequests = 10

// idle reports whether h has nothing in the window at period p.
func (h *host) idle(p int64) bool {
	for i := range buckets {
		if d := p - h.tick[i].Load(); d >= 0 && d < buckets && h.reqs[i].Load()+h.refs[i].Load() > 0 {
			return false
		}
	}
	return true
}

// host returns key's window, making it if it is new.
func (th *throttle) host(key string) *host {
	return th.hosts.LoadOrMake(key, func() *host {
		h := &host{}
		h.latest.Store(math.MinInt64)
		h.empty()
		return h
	})
}

type transport struct {
	th   *throttle
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	th := t.th
	key := wire.HostKey(req.URL)
	p := th.period(th.cfg.Now())
	h := th.host(key)
	h.at(p)
	if prob := h.probability(p, th.cfg.K); prob > 0 {
		op, _ := middleware.OperationOf(req.Context())
		if op.Attempt() > 1 || th.cfg.Rand() < prob {
			h.refused(p) // a request, while the host rejects: the client sends about K times what it accepts
			if req.Body != nil {
				req.Body.Close() // the RoundTripper's, even when it sends nothing
			}
			host, port := wire.ServerAddress(req) // as the attempt spans and the HTTP metrics say it
			op.Emit(middleware.Event{Name: protocol.EventThrottle, Attrs: []attribute.KeyValue{
				attribute.String(protocol.AttrServerAddress, host), attribute.Int(protocol.AttrServerPort, port),
				attribute.Float64(protocol.AttrThrottleProbability, prob)}})
			return nil, &refusal{host: key, prob: prob}
		}
	}
	resp, err := wire.RoundTrip(t.next, req)
	if _, refused := errors.AsType[policy.Refusal](err); err == nil || !(errors.Is(err, context.Canceled) || refused) {
		// A cancellation (the caller gave up, a hedge lost), or a
		// refusal by a layer below (a concurrency limit), says nothing of
		// the host: neither an accept nor a rejection.
		h.count(p, !th.cfg.Overloaded(resp, err)) // in the bucket it started in: one clock read per request
	}
	return resp, err
}

// refusal is the error of a request the layer refused: nothing was sent.
type refusal struct {
	host string
	prob float64
}

func (e *refusal) Error() string {
	return fmt.Sprintf("throttle: %s rejects too much of what it is sent: refused locally (probability %.2f)", e.host, e.prob)
}

// StopReason makes the error a policy.Refusal: a retry layer above stops
// with throttled.
func (e *refusal) StopReason() policy.StopReason { return policy.StopThrottled }
