package policy

import (
	"math"
	"time"

	"github.com/sethvargo/go-retry"
)

// Jitter is how a backoff randomises its waits.
type Jitter uint8

const (
	// JitterFull waits uniform(0, d): the spread that best breaks up
	// synchronised clients (AWS's "full jitter"). The default.
	JitterFull Jitter = iota
	// JitterNone waits exactly d.
	JitterNone
	// JitterTenPercent waits d × [0.9, 1.1), as Codex does.
	JitterTenPercent
)

// Backoff describes the waits between attempts: exponential, the wait
// before retry n (n = 1, 2, ...) being min(Cap, Base·2^(n-1)), then
// jittered; or any go-retry backoff that Make returns. The zero value never
// waits, as reqwest resends at once.
type Backoff struct {
	Base   time.Duration // the first wait before jitter; 0: no wait at all
	Cap    time.Duration // the longest wait before jitter; 0: no cap
	Jitter Jitter
	// Make, when set, makes the waits instead, and Base, Cap and Jitter
	// must be zero: any go-retry backoff (retry.NewConstant,
	// retry.NewFibonacci, decorators such as retry.WithMaxRetries), a new
	// one for each operation,
	// since go-retry backoffs hold state. When it says stop, the
	// operation stops as attempts-exhausted.
	Make func() retry.Backoff
}

// New returns a fresh go-retry backoff for one operation; go-retry backoffs
// hold state, so one must never be shared. rnd returns values in [0, 1)
// and must be safe for concurrent use; nil means math/rand/v2.
func (b Backoff) New(rnd func() float64) retry.Backoff {
	if b.Make != nil {
		return b.Make()
	}
	if b.Base <= 0 {
		return retry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
	}
	next := retry.NewExponential(b.Base)
	if b.Cap > 0 {
		next = retry.WithCappedDuration(b.Cap, next)
	}
	switch b.Jitter {
	case JitterFull:
		next = withFullJitter(rnd, next)
	case JitterTenPercent:
		next = withProportionalJitter(0.1, rnd, next)
	}
	return next
}

// withFullJitter returns a backoff that waits floor(r·d) for each wait d
// of next, with r from rnd (nil: math/rand/v2). Unlike go-retry's own
// withFullJitter, its randomness can be fixed (a test's r=0.5).
func withFullJitter(rnd func() float64, next retry.Backoff) retry.Backoff {
	rnd = orDefault(rnd)
	return retry.BackoffFunc(func() (time.Duration, bool) {
		d, stop := next.Next()
		if stop {
			return 0, true
		}
		return clamp(rnd() * float64(d)), false
	})
}

// withProportionalJitter returns a backoff that waits d × [1-f, 1+f) for
// each wait d of next, with randomness from rnd (nil: math/rand/v2).
func withProportionalJitter(f float64, rnd func() float64, next retry.Backoff) retry.Backoff {
	rnd = orDefault(rnd)
	return retry.BackoffFunc(func() (time.Duration, bool) {
		d, stop := next.Next()
		if stop {
			return 0, true
		}
		return clamp(float64(d) * (1 - f + 2*f*rnd())), false
	})
}

// clamp converts f to a Duration without overflowing.
func clamp(f float64) time.Duration {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(max(f, 0))
}
