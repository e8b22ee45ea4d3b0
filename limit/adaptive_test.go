package limit

import (
	"context"
	"testing"
	"time"
)

// service is a simulated service in virtual time: C workers sharing the
// requests in flight, each needing S of one worker, so a request's latency
// is S while n <= C and S·n/C beyond (processor sharing).
type service struct {
	c int
	s time.Duration
}

func (sv service) latency(n int) time.Duration {
	if n <= sv.c {
		return sv.s
	}
	return sv.s * time.Duration(n) / time.Duration(sv.c)
}

// sim drives a limiter's key with a client that always has work (or at
// most demand requests in flight), in virtual time: it fills the room the
// key gives, then completes the oldest request at the latency the service
// gives the load, advancing the clock by latency/n (Little's law).
type sim struct {
	t     *testing.T
	l     *Limiter
	now   time.Time
	k     *key
	held  []admission
	last  time.Duration // the latency of the last request completed
	limit int           // the room at the last step
}

func newSim(t *testing.T, cfg Config) *sim {
	s := &sim{t: t, now: time.Unix(1_800_000_000, 0)}
	cfg.Now = func() time.Time { return s.now }
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	return s
}

func (s *sim) run(sv service, steps, demand int) {
	for range steps {
		for len(s.held) < demand {
			s.k.mu.Lock()
			full := s.k.inflight >= s.k.room(&s.l.cfg)
			s.k.mu.Unlock()
			if full {
				break
			}
			k, adm, err := s.l.acquire(context.Background(), "svc", false)
			if err != nil {
				s.t.Fatal(err)
			}
			s.k, s.held = k, append(s.held, adm)
		}
		n := len(s.held)
		lat := sv.latency(n)
		s.now = s.now.Add(lat / time.Duration(n))
		adm := s.held[0]
		s.held = s.held[1:]
		if adm.start.After(s.now.Add(-lat)) {
			adm.start = s.now.Add(-lat) // it took the latency the load gives
		}
		s.last = lat
		s.l.release(s.k, adm, true)
		s.k.mu.Lock()
		s.limit = s.k.room(&s.l.cfg)
		s.k.mu.Unlock()
	}
}

func (s *sim) start() {
	k, adm, err := s.l.acquire(context.Background(), "svc", false)
	if err != nil {
		s.t.Fatal(err)
	}
	s.k = k
	s.l.release(k, adm, false)
}

// The adaptive limit finds a service's concurrency from latency: under a
// client that always has work it settles above the service's workers with
// a bounded queue (latency within 2× the service time), follows the
// service down when it loses capacity, and back up; when the service
// slows for good, the probe of the minimum lets the limit recover; a
// client that uses little of its limit is not given more.
func TestAdaptiveFindsTheLimit(t *testing.T) {
	const S = 10 * time.Millisecond
	s := newSim(t, Config{Limit: 10, Adaptive: true})
	s.start()
	s.run(service{c: 20, s: S}, 5000, 1<<30)
	if s.limit < 20 || s.limit > 40 || s.last > 2*S {
		t.Fatalf("capacity 20: limit %d, latency %v; want 20 to 40, within 2×%v", s.limit, s.last, S)
	}
	s.run(service{c: 5, s: S}, 5000, 1<<30)
	if s.limit < 5 || s.limit > 12 || s.last > 2*S+S/2 {
		t.Fatalf("capacity 5: limit %d, latency %v; want 5 to 12", s.limit, s.last)
	}
	s.run(service{c: 20, s: S}, 20000, 1<<30)
	if s.limit < 20 || s.limit > 40 {
		t.Fatalf("capacity back to 20: limit %d; want 20 to 40", s.limit)
	}
	// Slower for good, the same workers: until the minimum is measured
	// again the limit sits below the workers; after a probe it is back.
	s.run(service{c: 20, s: 2 * S}, 200, 1<<30)
	start := s.now
	for s.now.Sub(start) < 2*probeEvery {
		s.run(service{c: 20, s: 2 * S}, 1000, 1<<30)
	}
	if s.limit < 20 || s.limit > 40 || s.k.ad.minRTT < 2*S {
		t.Fatalf("slower for good: limit %d, minimum %v; want 20 to 40, and a minimum of %v", s.limit, s.k.ad.minRTT, 2*S)
	}
}

func TestAdaptiveAppLimited(t *testing.T) {
	s := newSim(t, Config{Limit: 10, Adaptive: true})
	s.start()
	s.run(service{c: 100, s: time.Millisecond}, 10000, 2)
	if s.limit > 10+1 {
		t.Fatalf("a client with 2 in flight grew its limit to %d", s.limit)
	}
}

// The limit stays within MinLimit and MaxLimit, whatever the service.
func TestAdaptiveBounds(t *testing.T) {
	s := newSim(t, Config{Limit: 8, Adaptive: true, MinLimit: 4, MaxLimit: 16})
	s.start()
	s.run(service{c: 1000, s: time.Millisecond}, 5000, 1<<30)
	if s.limit != 16 {
		t.Fatalf("an idle service: limit %d, want MaxLimit 16", s.limit)
	}
	s.run(service{c: 1, s: time.Millisecond}, 5000, 1<<30)
	if s.limit != 4 {
		t.Fatalf("a saturated service: limit %d, want MinLimit 4", s.limit)
	}
}
