package policy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Budget limits retries across every request that shares it: each request
// the classifier does not retry deposits, each retry withdraws, and a retry
// that cannot withdraw is not made (stop reason budget-exhausted, pitfall
// budget-exhausted). A retry that is refused for another reason (its wait
// would not fit) withdraws nothing, and so does the resend of an attempt
// that never reached the server (a failed dial, a refused stream).
// Implementations must be safe for concurrent use and quick: they run on
// every request. [NewEarnedBudget] makes [Default]'s, [NewTPSBudget]
// tower's.
//
// A Budget may also have the methods WithdrawAfterTimeout() bool and
// Refund(), as NewEarnedBudget's has: the engine then pays for the retry
// of an unkeyed attempt that timed out with WithdrawAfterTimeout instead
// of Withdraw (a refusal there stops timeout-not-retried, not
// budget-exhausted), and, when an operation ends in success, calls Refund
// once for each of its retries that Withdraw paid for. With a method DepositAt(now time.Time) it calls that instead of
// Deposit, with the time it has just read as the request ended (with a
// monotonic reading), so that the budget need not read the clock again.
type Budget interface {
	Deposit()
	Withdraw() bool
}

// tpsBudget is the budget NewTPSBudget makes.
type tpsBudget struct {
	deposit, withdraw int64
	reserve           int64
	window            time.Duration // ttl / slots

	slots  [budgetSlots]atomic.Int64 // committed windows
	writer atomic.Int64              // the current window
	genAt  atomic.Int64              // when the current window began (ns since start)

	mu    sync.Mutex // serialises the move to a new window
	index int        // the slot the current window commits to

	start time.Time
	since func(time.Time) time.Duration // a test's clock; nil: time.Since
}

const budgetSlots = 10

// maxMinPerSec is the largest reserve NewTPSBudget accepts, in retries a
// second.
const maxMinPerSec = 1_000_000

// NewTPSBudget returns a client-wide retry budget: the tower/Finagle TPS
// budget that reqwest uses. Every request the classifier does not retry deposits; every
// retry withdraws; a retry that cannot withdraw is not made. Deposits and
// withdrawals count for ttl and then expire, so the budget follows the
// recent success rate, and a reserve of minPerSec·ttl retries is always
// available, so a client that has just started can still retry.
//
// One Budget is shared by every request of a client, every redirect hop
// included; it is safe for concurrent use, does not allocate, and takes a
// lock only when its window moves on. Its Retries method (assert
// interface{ Retries() int }) tells how many retries it would allow now.
//
// Deposits are counted for ttl (1 to 60 seconds), a reserve of minPerSec
// retries per second of ttl, and room for ratio retries per deposit (0,
// or 1e-6 to 1000; 0.2 means 20 % extra load, 0 means only the reserve). Out-of-range values are a
// *ConfigError.
//
// As in tower, a ratio r <= 1 deposits 1 and withdraws floor(1/r) per
// retry; r > 1 deposits 1000 and withdraws floor(1000/r); r = 0 deposits
// nothing and withdraws 1. The reserve is minPerSec·ttl·withdraw.
func NewTPSBudget(ttl time.Duration, minPerSec int, ratio float64) (Budget, error) {
	switch {
	case ttl < time.Second || ttl > time.Minute:
		return nil, &ConfigError{Field: "policy.NewTPSBudget(ttl)", Value: ttl, Reason: "must be between 1s and 1m (tower's: 10s)"}
	case minPerSec < 0 || minPerSec > maxMinPerSec:
		return nil, &ConfigError{Field: "policy.NewTPSBudget(minPerSec)", Value: minPerSec, Reason: "must be between 0 and 1000000 (tower's: 10): a reserve of more retries a second than any client sends never refuses one"}
	case !(ratio >= 0 && ratio <= 1000): // also rejects NaN
		return nil, &ConfigError{Field: "policy.NewTPSBudget(ratio)", Value: ratio, Reason: "must be between 0 and 1000 (0.2: retries add at most 20 % load)"}
	case ratio > 0 && ratio < minBudgetRatio:
		return nil, &ConfigError{Field: "policy.NewTPSBudget(ratio)", Value: ratio, Reason: "must be 0 (only the reserve) or at least 1e-6"}
	case ratio == 0 && minPerSec == 0:
		return nil, &ConfigError{Field: "policy.NewTPSBudget(minPerSec)", Value: minPerSec, Reason: "must be above 0 when ratio is 0: with neither a reserve nor a ratio the budget never allows a retry (set Policy.MaxAttempts to 1 for that)"}
	}
	return newTPSBudget(ttl, minPerSec, ratio), nil
}

// newTPSBudget is NewTPSBudget for values it accepts.
func newTPSBudget(ttl time.Duration, minPerSec int, ratio float64) *tpsBudget {
	b := &tpsBudget{window: ttl / budgetSlots, start: time.Now()}
	// float32, as tower computes it, so the amounts match to the token.
	r := float32(ratio)
	switch {
	case r == 0:
		b.deposit, b.withdraw = 0, 1
	case r <= 1:
		b.deposit, b.withdraw = 1, int64(1/r)
	default:
		b.deposit, b.withdraw = 1000, int64(1000/r)
	}
	b.reserve = int64(minPerSec) * int64(ttl/time.Second) * b.withdraw
	return b
}

// Deposit records a request that needed no retry.
func (b *tpsBudget) Deposit() { b.depositAt(time.Time{}) }

// depositAt is Deposit at t (the zero Time: now).
func (b *tpsBudget) depositAt(t time.Time) {
	if b.unlimited() {
		return
	}
	b.expireAt(b.now(t))
	b.writer.Add(b.deposit)
}

// Withdraw takes one retry's worth from the budget and reports whether it
// could. Under concurrent withdrawals the balance may dip below zero by the
// withdrawals in flight, as in tower.
func (b *tpsBudget) Withdraw() bool {
	if b.unlimited() {
		return true
	}
	b.expire()
	if b.balance() < b.withdraw {
		return false
	}
	b.writer.Add(-b.withdraw)
	return true
}

// Retries is how many retries the budget would allow now: its level, for
// telemetry. A nil or zero budget reports -1 (unlimited).
func (b *tpsBudget) Retries() int {
	if b.unlimited() {
		return -1
	}
	b.expire()
	return int(max(b.balance(), 0) / b.withdraw)
}

// unlimited reports whether b is nil or the zero tpsBudget, which
// NewTPSBudget never returns (it always withdraws something).
func (b *tpsBudget) unlimited() bool { return b == nil || b.withdraw == 0 }

func (b *tpsBudget) String() string {
	if b.unlimited() {
		return "unlimited"
	}
	return fmt.Sprintf("budget(deposit %d, withdraw %d, reserve %d, %d retries left)", b.deposit, b.withdraw, b.reserve, b.Retries())
}

func (b *tpsBudget) balance() int64 {
	sum := b.writer.Load() + b.reserve
	for i := range b.slots {
		sum += b.slots[i].Load()
	}
	return sum
}

// expire commits the current window and clears the slots that have aged
// past ttl, once a window has gone by.
func (b *tpsBudget) expire() { b.expireAt(b.now(time.Time{})) }

// now is the budget's time, in nanoseconds since start: read from the
// clock, or t when given (a reading of the caller's, monotonic); a test's
// clock wins over both.
func (b *tpsBudget) now(t time.Time) int64 {
	switch {
	case b.since != nil:
		return int64(b.since(b.start))
	case !t.IsZero():
		return int64(t.Sub(b.start))
	}
	return int64(time.Since(b.start))
}

// expireAt is expire at now, in nanoseconds since start.
func (b *tpsBudget) expireAt(now int64) {
	// A reading a little older than the window's start (taken before
	// another goroutine moved the window on) counts in the current window.
	if d := now - b.genAt.Load(); d > -int64(b.window) && d < int64(b.window) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	diff := time.Duration(now - b.genAt.Load())
	if diff <= -b.window {
		// A clock that went back (an injected one: time.Since is
		// monotonic): the current window starts again now, instead of
		// holding every deposit until the clock catches up.
		b.genAt.Store(now)
		return
	}
	if diff < b.window {
		return // another goroutine moved the window on
	}
	b.slots[b.index].Store(b.writer.Swap(0))
	// Move on one slot per window gone by, clearing each: it held the
	// window one ttl ago, which has now expired. After a long idle every
	// slot is stale.
	idx := b.index
	for n := 0; diff >= b.window && n < budgetSlots; n++ {
		idx = (idx + 1) % budgetSlots
		b.slots[idx].Store(0)
		diff -= b.window
	}
	b.index = idx
	b.genAt.Store(now)
}

// earnedBudget is the budget NewEarnedBudget makes.
type earnedBudget struct {
	earn  int64        // credit per success, in millionths of a retry
	burst int64        // the stock's floor cap: what a client without recent successes may hold
	stock atomic.Int64 // credit for retries after fast failures

	// recent is credit earned in the last second: it raises the stock's
	// cap, and it alone pays for retries after an attempt that timed out
	// (four retries' worth a retry, two when the retry is refused).
	recent *tpsBudget
}

// unit is one retry's worth of an earnedBudget's credit.
const unit = 1_000_000

// NewEarnedBudget returns the budget of [Default]: retries are paid for only
// by the client's own successes, so that a fleet of clients retries no
// more than its successes pay for, however many clients it has.
//
//   - Every request that needed no retry earns ratio of a retry (0.2:
//     one retry for five successes).
//   - The credit a client holds is capped at burst retries plus what its
//     successes of the last second earned, and a new budget starts with
//     burst: a client that has just started can retry, a busy client can
//     retry the failures of its many requests in flight, and no client
//     holds more than its recent successes paid for (a fleet of N: at most
//     burst·N plus ratio of its last second's successes). Nothing refills
//     with time.
//   - The retries of an operation that ends in success are paid back, all
//     of them: they turned a failure into a success. Retries that fail are
//     not; a client whose retries succeed may thus retry more than ratio
//     of its successes, one whose retries fail stops after its stock.
//   - A retry after an attempt that timed out (the server may still be
//     working on it: a retry doubles the work of a service that is
//     already slow) is paid for from the credit earned in the last second
//     alone, not from the stock, four times over: a timeout the engine
//     would retry spends two retries' worth whether the retry is made or
//     not, and the retry two more. At ratio 0.2 a client that had fewer
//     than 20 successes in the last second does not retry its timeouts
//     (stop reason timeout-not-retried), a fleet of small clients adds no
//     load to an overloaded service, and a client whose attempts start to
//     time out soon stops retrying them. Keyed requests (an
//     Idempotency-Key) are exempt from that rule: a server that honours
//     the key does not do the work twice. A timeout is
//     Policy.AttemptTimeout's; a transport's own (a dial or
//     response-header timeout) and a 504 are paid from the stock. [Alone]'s
//     budget is this one without that rule.
//
// The engine does not charge a budget for resending an attempt that never
// reached the server (a failed dial, a refused HTTP/2 stream; not under a
// hedge, whose error may be a later send's): it cost the server nothing.
//
// ratio must be between 1e-6 and 1 (a budget that earns nothing never
// allows a retry; one that earns more than a retry per success allows
// more retries than successes); burst between 1 and 1000 (a stock below
// one retry never allows one; one above 1000 lets each client of a fleet
// spend more at once than most services can absorb). Other values are a
// *ConfigError naming the bound. The budget is safe for concurrent use and
// does not allocate.
func NewEarnedBudget(ratio float64, burst int) (Budget, error) {
	switch {
	case ratio > 1:
		return nil, &ConfigError{Field: "policy.NewEarnedBudget(ratio)", Value: ratio, Reason: "must be at most 1 (Default's: 0.2): more than one retry per success allows more retries than successes"}
	case !(ratio >= minBudgetRatio): // also rejects NaN
		return nil, &ConfigError{Field: "policy.NewEarnedBudget(ratio)", Value: ratio, Reason: "must be at least 1e-6 (Default's: 0.2): a budget that earns nothing never allows a retry (set Policy.MaxAttempts to 1 for that)"}
	case burst < 1:
		return nil, &ConfigError{Field: "policy.NewEarnedBudget(burst)", Value: burst, Reason: "must be at least 1 (Default's: 2): a stock below one retry never allows one"}
	case burst > maxBurst:
		return nil, &ConfigError{Field: "policy.NewEarnedBudget(burst)", Value: burst, Reason: "must be at most 1000 (Default's: 2): a larger stock lets each client of a fleet spend more retries at once than a slow service can absorb"}
	}
	return newEarnedBudget(ratio, burst), nil
}

// maxBurst is the largest stock NewEarnedBudget accepts, in retries.
const maxBurst = 1000

func newEarnedBudget(ratio float64, burst int) *earnedBudget {
	b := &earnedBudget{earn: int64(ratio * unit), burst: int64(burst) * unit, recent: newTPSBudget(time.Second, 0, ratio)}
	b.stock.Store(b.burst)
	return b
}

// Deposit records a request that needed no retry.
func (b *earnedBudget) Deposit() { b.DepositAt(time.Time{}) }

// DepositAt is Deposit when the caller has just read the clock (the
// retry layer, as its attempt ends): one reading less a request. now must
// carry a monotonic reading, as time.Now's does; the zero Time reads the
// clock.
func (b *earnedBudget) DepositAt(now time.Time) {
	b.recent.depositAt(now)
	b.add(b.earn)
}

// limit is the most credit the stock may hold now: burst, and what the
// last second's successes earned beyond what they paid for.
func (b *earnedBudget) limit() int64 {
	return b.burst + max(b.recent.balance(), 0)*unit/b.recent.withdraw
}

// add puts credit into the stock, up to its limit.
func (b *earnedBudget) add(credit int64) {
	limit := b.limit()
	for {
		s := b.stock.Load()
		if s >= limit || b.stock.CompareAndSwap(s, min(s+credit, limit)) {
			return
		}
	}
}

// Withdraw pays for a retry from the stock; it takes the last second's
// credit too where there is some, so that the two together stay within
// ratio of the successes. Credit beyond the stock's limit now (earned
// when the client succeeded more often than it does now) is dropped
// first.
func (b *earnedBudget) Withdraw() bool {
	b.recent.expire()
	limit := b.limit()
	for {
		s := b.stock.Load()
		have := min(s, limit)
		if have < unit {
			return false
		}
		if b.stock.CompareAndSwap(s, have-unit) {
			b.recent.Withdraw()
			return true
		}
	}
}

// Refund pays back a retry, paid by Withdraw, of an operation that
// succeeded: it turned a failure into a success, which is what the
// budget is for.
func (b *earnedBudget) Refund() { b.add(unit) }

// WithdrawAfterTimeout pays for the retry of an attempt that timed out
// from the credit earned in the last second: the timeout spends two
// retries' worth, whether it is retried or not (the last second's
// successes say less once attempts time out), and its retry two more.
func (b *earnedBudget) WithdrawAfterTimeout() bool {
	b.recent.expire()
	w := b.recent.withdraw
	if b.recent.balance() < 4*w {
		b.recent.writer.Add(-2 * w)
		return false
	}
	b.recent.writer.Add(-4 * w)
	return true
}

// Retries is how many retries after fast failures the budget would allow
// now, for telemetry.
func (b *earnedBudget) Retries() int {
	b.recent.expire()
	return int(min(b.stock.Load(), b.limit()) / unit)
}

func (b *earnedBudget) String() string { return b.describe("earned budget") }

// describe is the budget's String, under name.
func (b *earnedBudget) describe(name string) string {
	return fmt.Sprintf("%s(%.2f a success, at least %d, %d retries left)", name, float64(b.earn)/unit, b.burst/unit, b.Retries())
}

// aloneBudget is [Alone]'s: an earnedBudget whose stock pays for the retry
// of an attempt that timed out too. It has no WithdrawAfterTimeout, so the
// engine pays such a retry with Withdraw, and pays it back if it succeeds.
type aloneBudget struct{ b *earnedBudget }

func (a aloneBudget) Deposit()              { a.b.Deposit() }
func (a aloneBudget) DepositAt(t time.Time) { a.b.DepositAt(t) }
func (a aloneBudget) Withdraw() bool        { return a.b.Withdraw() }
func (a aloneBudget) Refund()               { a.b.Refund() }
func (a aloneBudget) Retries() int          { return a.b.Retries() }
func (a aloneBudget) String() string        { return a.b.describe("alone budget") }
