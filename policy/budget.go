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
// would not fit) withdraws nothing. Implementations must be safe for
// concurrent use and quick: they run on every request. NewTPSBudget
// makes the usual one.
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
	since func(time.Time) time.Duration // replaced by tests
}

const budgetSlots = 10

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
		return nil, &ConfigError{Field: "Budget.TTL", Value: ttl, Reason: "must be between 1s and 1m (tower's and policy.Default()'s: 10s)"}
	case minPerSec < 0 || minPerSec > 1<<31-2:
		return nil, &ConfigError{Field: "Budget.MinPerSecond", Value: minPerSec, Reason: "must be between 0 and 2147483646 (policy.Default()'s: 10)"}
	case !(ratio >= 0 && ratio <= 1000): // also rejects NaN
		return nil, &ConfigError{Field: "Budget.Ratio", Value: ratio, Reason: "must be between 0 and 1000 (0.2: retries add at most 20 % load)"}
	case ratio > 0 && ratio < minBudgetRatio:
		return nil, &ConfigError{Field: "Budget.Ratio", Value: ratio, Reason: "must be 0 (only the reserve) or at least 1e-6"}
	}
	return newTPSBudget(ttl, minPerSec, ratio), nil
}

// newTPSBudget is NewTPSBudget for values it accepts.
func newTPSBudget(ttl time.Duration, minPerSec int, ratio float64) *tpsBudget {
	b := &tpsBudget{window: ttl / budgetSlots, start: time.Now(), since: time.Since}
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
func (b *tpsBudget) Deposit() {
	if b.unlimited() {
		return
	}
	b.expire()
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
func (b *tpsBudget) expire() {
	now := int64(b.since(b.start))
	if now-b.genAt.Load() < int64(b.window) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	diff := time.Duration(now - b.genAt.Load())
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
