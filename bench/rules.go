package bench

import (
	"sync"
	"time"

	"github.com/retrystack/retrystack/policy"
)

// The frontier's rules (issue 43): retry budgets the lone-client cells and
// the fleet experiment compare beside policy.Default()'s and Alone()'s,
// written here as policy.Budget implementations so that the library need
// not ship them. Each is per client, safe for concurrent use, and has the
// optional methods the engine asks for (policy/budget.go): Withdraw pays a
// retry after a fast failure, WithdrawAfterTimeout the retry of an unkeyed
// attempt that Policy.AttemptTimeout ended, Refund pays back a retry paid
// by Withdraw whose chain ended in success. Deposit is the engine's: an
// operation that ended without a further retry (not a refusal, a pushback
// or an attempt that timed out).
//
// Every rule reads its clock through now, so that a test can step time
// without sleeping.

// unit is one retry's worth of the earned budgets' credit.
const unit = 1_000_000

// window counts a value over the last second, in ten slots of 100 ms: the
// tower TPS budget policy/budget.go builds its earned budget's "last
// second" from (NewTPSBudget(1s, 0, 0.2): a deposit adds 1, a retry takes
// 5, no reserve).
type window struct {
	slots [10]int64
	at    int64 // the slot index (time in units of 100 ms) of the newest slot
}

const slot = 100 * time.Millisecond

// advance moves the window to now's slot, clearing the slots that have
// aged past a second; a clock that went back starts the window again.
func (w *window) advance(now time.Time) {
	idx := now.UnixNano() / int64(slot)
	switch d := idx - w.at; {
	case d == 0:
	case d < 0 || d >= int64(len(w.slots)):
		w.slots = [10]int64{}
	default:
		for i := w.at + 1; i <= idx; i++ {
			w.slots[i%int64(len(w.slots))] = 0
		}
	}
	w.at = idx
}

func (w *window) add(now time.Time, v int64) {
	w.advance(now)
	w.slots[w.at%int64(len(w.slots))] += v
}

func (w *window) sum(now time.Time) int64 {
	w.advance(now)
	var s int64
	for _, v := range w.slots {
		s += v
	}
	return s
}

// wave4Budget is wave 4's policy.Default() budget, copied from
// policy/budget.go's earnedBudget at commit 14d9e86 (the library has since
// changed it): a success earns 0.2 of a retry into a stock capped at 2
// (full at the start, nothing refills with time); a retry after a fast
// failure is paid from the stock (and takes the last second's credit too,
// where there is some), and paid back when it succeeds; a timeout's retry
// is paid only from the credit of the last second's successes, four
// retries' worth (a refused one still spends two), so that a client with
// fewer than 20 successes in the last second never retries a timeout.
type wave4Budget struct {
	mu     sync.Mutex
	stock  int64  // in millionths of a retry
	recent window // the last second: +1 a deposit, 5 a retry
	now    func() time.Time
	// refunded: a Refund has paid since the last Deposit.
	refunded bool

	// sketch: the review's rule on top (see newSketchBudget); 0: off.
	once                     time.Duration
	lastDeposit, lastTimeout time.Time
}

const (
	wave4Earn  = unit / 5 // 0.2 of a retry a success
	wave4Burst = 2 * unit
	wave4Cost  = 5 // a retry, in the last second's deposits (1/0.2)
)

// newWave4Budget is wave 4's earned budget (wave4Budget).
func newWave4Budget() *wave4Budget {
	return &wave4Budget{stock: wave4Burst, now: time.Now}
}

// newSketchBudget is the review's sketch (issue 43): wave 4's budget, and a
// timeout's retry that its last-second rule refuses is paid from the
// stock instead when the client had a deposit (an operation that ended
// without a retry: mostly successes) in the last 2 s and made no such
// stock-paid timeout retry in the last once (10 s or 20 s).
func newSketchBudget(once time.Duration) *wave4Budget {
	b := newWave4Budget()
	b.once = once
	return b
}

// Deposit records an operation that ended without a retry.
func (b *wave4Budget) Deposit() {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stock = min(b.stock+wave4Earn, wave4Burst)
	b.recent.add(now, 1)
	b.lastDeposit = now
	b.refunded = false
}

// Withdraw pays a retry after a fast failure from the stock.
func (b *wave4Budget) Withdraw() bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stock < unit {
		return false
	}
	b.stock -= unit
	if b.recent.sum(now) >= wave4Cost {
		b.recent.add(now, -wave4Cost)
	}
	return true
}

// Refund pays back a retry that Withdraw paid and whose operation
// succeeded. Wave 4's engine paid back one retry an operation (the last);
// today's calls Refund for each, just after the operation's Deposit: only
// the first Refund after a Deposit pays, as wave 4's did. (Another
// operation's Deposit in between can let a second through: rare, and at
// most one retry.)
func (b *wave4Budget) Refund() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refunded {
		return
	}
	b.refunded = true
	b.stock = min(b.stock+unit, wave4Burst)
}

// WithdrawAfterTimeout pays a timeout's retry from the last second's
// credit at four retries' worth (a refusal spends two); the sketch then
// pays from the stock, at most once per once, after a recent deposit.
func (b *wave4Budget) WithdrawAfterTimeout() bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recent.sum(now) >= 4*wave4Cost {
		b.recent.add(now, -4*wave4Cost)
		return true
	}
	b.recent.add(now, -2*wave4Cost)
	if b.once > 0 && b.stock >= unit && !b.lastDeposit.IsZero() && now.Sub(b.lastDeposit) < 2*time.Second &&
		(b.lastTimeout.IsZero() || now.Sub(b.lastTimeout) >= b.once) {
		b.stock -= unit
		b.lastTimeout = now
		return true
	}
	return false
}

// awsQuota is an AWS SDK style retry quota (aws-sdk-go-v2's
// retry.NewTokenRateLimit, the standard retryer's defaults): 500 tokens,
// full at the start; a retry costs 5, the retry of an attempt that timed
// out 10, and an operation that ends without a retry gives 1 back, up to
// 500. (The SDK also gives a successful retry's cost back; as the issue
// states the quota, this one does not: it has no Refund.)
type awsQuota struct {
	mu     sync.Mutex
	tokens int
}

const (
	awsTokens      = 500
	awsRetryCost   = 5
	awsTimeoutCost = 10
)

func newAWSQuota() *awsQuota { return &awsQuota{tokens: awsTokens} }

// Deposit gives one token back.
func (q *awsQuota) Deposit() {
	q.mu.Lock()
	q.tokens = min(q.tokens+1, awsTokens)
	q.mu.Unlock()
}

// Withdraw pays a retry: 5 tokens.
func (q *awsQuota) Withdraw() bool { return q.take(awsRetryCost) }

// WithdrawAfterTimeout pays a timeout's retry: 10 tokens.
func (q *awsQuota) WithdrawAfterTimeout() bool { return q.take(awsTimeoutCost) }

func (q *awsQuota) take(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tokens < n {
		return false
	}
	q.tokens -= n
	return true
}

// The interfaces the engine asks a budget for, checked here so that a
// rule that lost a method fails to build rather than measure another
// rule.
var (
	_ policy.Budget                            = (*wave4Budget)(nil)
	_ interface{ WithdrawAfterTimeout() bool } = (*wave4Budget)(nil)
	_ interface{ Refund() }                    = (*wave4Budget)(nil)
	_ interface{ WithdrawAfterTimeout() bool } = (*awsQuota)(nil)
)
