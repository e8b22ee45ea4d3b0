package policy

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeSince makes a budget's clock manual.
func manual(b *tpsBudget) *time.Duration {
	var now time.Duration
	b.since = func(time.Time) time.Duration { return now }
	return &now
}

func withdrawals(b Budget) int {
	n := 0
	for b.Withdraw() {
		n++
	}
	return n
}

func TestBudgetArithmetic(t *testing.T) {
	tests := []struct {
		name              string
		ttl               time.Duration
		minPerSec         int
		ratio             float64
		deposit, withdraw int64
		reserveRetries    int
	}{
		{"reqwest 20 %", 10 * time.Second, 10, 0.2, 1, 5, 100},
		{"max_extra_load(0.0)", 10 * time.Second, 10, 0, 0, 1, 100},
		{"ratio 1", time.Second, 5, 1, 1, 1, 5},
		{"ratio 2: two retries a deposit", 10 * time.Second, 0, 2, 1000, 500, 0},
		{"no reserve", 10 * time.Second, 0, 0.1, 1, 10, 0},
	}
	for _, tt := range tests {
		b := newTPSBudget(tt.ttl, tt.minPerSec, tt.ratio)
		manual(b)
		if b.deposit != tt.deposit || b.withdraw != tt.withdraw {
			t.Errorf("%s: deposit %d, withdraw %d; want %d, %d", tt.name, b.deposit, b.withdraw, tt.deposit, tt.withdraw)
		}
		if got := b.Retries(); got != tt.reserveRetries {
			t.Errorf("%s: Retries() = %d, want %d", tt.name, got, tt.reserveRetries)
		}
		if got := withdrawals(b); got != tt.reserveRetries {
			t.Errorf("%s: %d withdrawals from the reserve, want %d", tt.name, got, tt.reserveRetries)
		}
	}
}

// Seed 000's experiment at the unit level: 100 retries from the reserve,
// then 20 successes buy 4 more.
func TestBudgetSeedExperiment(t *testing.T) {
	b := newTPSBudget(10*time.Second, 10, 0.2)
	now := manual(b)
	if got := withdrawals(b); got != 100 {
		t.Fatalf("reserve: %d retries, want 100", got)
	}
	*now += time.Second
	for range 20 {
		b.Deposit()
	}
	if got := withdrawals(b); got != 4 {
		t.Errorf("after 20 successes: %d retries, want 4", got)
	}
	// ratio 2: every deposit allows two retries.
	b = newTPSBudget(10*time.Second, 0, 2)
	manual(b)
	b.Deposit()
	if got := withdrawals(b); got != 2 {
		t.Errorf("ratio 2: %d retries for one deposit, want 2", got)
	}
}

// Deposits and withdrawals expire after ttl, in windows of ttl/10.
func TestBudgetExpiry(t *testing.T) {
	b := newTPSBudget(time.Second, 0, 1)
	now := manual(b)
	b.Deposit()
	*now += 3 * time.Second
	if b.Withdraw() {
		t.Error("a deposit older than ttl still pays for a retry")
	}

	// tower's tps_slots: a deposit 901 ms old is still valid.
	b = newTPSBudget(time.Second, 0, 0.5)
	now = manual(b)
	b.Deposit()
	b.Deposit()
	*now += 901 * time.Millisecond
	if !b.Withdraw() {
		t.Error("deposits 901 ms old: withdraw refused")
	}
	*now += 2001 * time.Millisecond // a blank slate
	b.Deposit()
	*now += 301 * time.Millisecond
	b.Deposit()
	*now += 801 * time.Millisecond
	b.Deposit()
	if !b.Withdraw() {
		t.Error("the 2nd and 3rd deposits should pay for a retry")
	}

	// Spent reserve comes back once the withdrawals expire.
	b = newTPSBudget(time.Second, 3, 1)
	now = manual(b)
	if got := withdrawals(b); got != 3 {
		t.Fatalf("%d retries, want 3", got)
	}
	*now += 2 * time.Second
	if got := withdrawals(b); got != 3 {
		t.Errorf("after ttl: %d retries, want the reserve's 3 again", got)
	}
	// A long idle does not loop per window.
	*now += 1000 * time.Hour
	if got := b.Retries(); got != 3 {
		t.Errorf("after a long idle: %d retries", got)
	}
}

func TestNilBudgetIsUnlimited(t *testing.T) {
	var b *tpsBudget
	b.Deposit()
	for range 1000 {
		if !b.Withdraw() {
			t.Fatal("nil budget refused a retry")
		}
	}
	if b.Retries() != -1 {
		t.Errorf("Retries() = %d, want -1", b.Retries())
	}
}

func TestNewBudgetRejects(t *testing.T) {
	tests := []struct {
		ttl       time.Duration
		minPerSec int
		ratio     float64
		field     string
	}{
		{999 * time.Millisecond, 10, 0.2, "policy.NewTPSBudget(ttl)"},
		{61 * time.Second, 10, 0.2, "policy.NewTPSBudget(ttl)"},
		{10 * time.Second, -1, 0.2, "policy.NewTPSBudget(minPerSec)"},
		{10 * time.Second, 10, -0.1, "policy.NewTPSBudget(ratio)"},
		{10 * time.Second, 10, 1000.5, "policy.NewTPSBudget(ratio)"},
		{10 * time.Second, 10, math.NaN(), "policy.NewTPSBudget(ratio)"},
		{10 * time.Second, 0, 0, "policy.NewTPSBudget(minPerSec)"},           // never allows a retry
		{10 * time.Second, 1_000_001, 0.2, "policy.NewTPSBudget(minPerSec)"}, // never refuses one
	}
	for _, tt := range tests {
		_, err := NewTPSBudget(tt.ttl, tt.minPerSec, tt.ratio)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("NewTPSBudget(%v, %d, %v) = %v, want a *ConfigError for %s", tt.ttl, tt.minPerSec, tt.ratio, err, tt.field)
		}
	}
}

func BenchmarkBudgetParallel(b *testing.B) {
	for _, bb := range []struct {
		name   string
		budget Budget
	}{{"tps", newTPSBudget(10*time.Second, 10, 0.2)}, {"earned", newEarnedBudget(0.2, 2)}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					if n%5 == 0 {
						bb.budget.Withdraw()
					} else {
						bb.budget.Deposit()
					}
					n++
				}
			})
		})
	}
}

// A ratio too small for the arithmetic is refused: it would overflow the
// amount withdrawn per retry and allow every retry.
func TestTinyRatioIsRefused(t *testing.T) {
	for _, r := range []float64{1e-30, 1e-7, math.SmallestNonzeroFloat64} {
		var ce *ConfigError
		if _, err := NewTPSBudget(10*time.Second, 10, r); !errors.As(err, &ce) || ce.Field != "policy.NewTPSBudget(ratio)" {
			t.Errorf("ratio %g: %v, want a *ConfigError", r, err)
		}
	}
	b, err := NewTPSBudget(10*time.Second, 0, minBudgetRatio)
	if err != nil {
		t.Fatal(err)
	}
	manual(b.(*tpsBudget))
	if n := withdrawals(b.(*tpsBudget)); n != 0 {
		t.Errorf("the smallest ratio, with no reserve and no success, allowed %d retries", n)
	}
}

// The zero budget never panics: it is unlimited, like nil (only the
// package can make one: NewTPSBudget never does).
func TestZeroBudget(t *testing.T) {
	var b tpsBudget
	b.Deposit()
	for range 3 {
		if !b.Withdraw() {
			t.Fatal("the zero Budget refused a retry")
		}
	}
	if b.Retries() != -1 || b.String() != "unlimited" {
		t.Errorf("Retries %d, String %q", b.Retries(), b.String())
	}
}

// Under steady traffic, with the clock moving a little at a time, a deposit
// counts for the whole ttl, not half of it.
func TestBudgetDepositsLastTheTTL(t *testing.T) {
	b := newTPSBudget(time.Second, 0, 1)
	now := manual(b)
	for range 100 {
		b.Deposit()
	}
	for *now = 0; *now < 900*time.Millisecond; *now += 5 * time.Millisecond {
		if n := b.Retries(); n != 100 {
			t.Fatalf("at %v: %d retries left, want the 100 deposited", *now, n)
		}
	}
	for ; *now < 1200*time.Millisecond; *now += 5 * time.Millisecond {
		b.Retries()
	}
	if n := b.Retries(); n != 0 {
		t.Errorf("after the ttl: %d retries left, want 0", n)
	}
}

func earned(ratio float64, burst int) (*earnedBudget, *time.Duration) {
	b := newEarnedBudget(ratio, burst)
	return b, manual(b.recent)
}

// A new earned budget holds its burst; afterwards only successes refill
// it, one retry for five, never past the burst, and never with time.
func TestEarnedBudgetStock(t *testing.T) {
	b, now := earned(0.2, 2)
	if got := withdrawals(b); got != 2 {
		t.Fatalf("a new budget: %d retries, want its burst of 2", got)
	}
	*now += time.Hour
	if b.Withdraw() {
		t.Fatal("an hour later, with no success: a retry allowed; nothing refills with time")
	}
	for range 4 {
		b.Deposit()
	}
	if b.Withdraw() {
		t.Fatal("4 successes paid for a retry; it takes 5")
	}
	b.Deposit()
	if !b.Withdraw() || b.Withdraw() {
		t.Fatal("5 successes should pay for exactly one retry")
	}
	// The stock's cap grows with the last second's successes, so that a
	// busy client can retry the failures of its many requests in flight;
	// once they are older than a second, it falls back to the burst.
	for range 1000 {
		b.Deposit()
	}
	if got := withdrawals(b); got != 200 {
		t.Errorf("after 1000 successes in the last second: %d retries at once, want the 200 they paid for", got)
	}
	for range 1000 {
		b.Deposit()
	}
	*now += 2 * time.Second
	if got := withdrawals(b); got != 2 {
		t.Errorf("1000 successes, 2 s ago: %d retries at once, want the burst of 2", got)
	}
}

// A retry that succeeded pays for itself: a client whose every request
// needs one retry keeps retrying.
func TestEarnedBudgetRefund(t *testing.T) {
	b, now := earned(0.2, 2)
	for i := range 100 {
		if !b.Withdraw() {
			t.Fatalf("operation %d: retry refused", i)
		}
		b.Deposit() // the retry's success
		b.Refund()
	}
	// Retries that fail are not refunded.
	*now += 2 * time.Second // the successes above no longer raise the cap
	for range 2 {
		b.Withdraw()
	}
	if b.Withdraw() {
		t.Error("failed retries were refunded")
	}
}

// The retry of an attempt that timed out is paid from the credit of the
// last second alone, four times over (two for the timeout, retried or
// not, two for its retry): a client of fewer than 20 successes a second
// never retries a timeout, and its stock does not help.
func TestEarnedBudgetAfterTimeout(t *testing.T) {
	b, _ := earned(0.2, 2)
	if b.WithdrawAfterTimeout() {
		t.Fatal("a new budget retried a timeout: its stock is for fast failures")
	}
	b, _ = earned(0.2, 2)
	for range 19 {
		b.Deposit()
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("19 successes in the last second paid for a timeout's retry; it takes 20")
	}
	b, _ = earned(0.2, 2)
	for range 20 {
		b.Deposit()
	}
	if !b.WithdrawAfterTimeout() || b.WithdrawAfterTimeout() {
		t.Fatal("20 successes in the last second should pay for exactly one timeout's retry")
	}
	// A timeout that is not retried spends two retries' worth still.
	b, now := earned(0.2, 2)
	for range 30 {
		b.Deposit()
	}
	if !b.WithdrawAfterTimeout() || b.WithdrawAfterTimeout() { // 6, 2, then 0
		t.Fatal("30 successes: want one timeout's retry")
	}
	for range 20 {
		b.Deposit()
	}
	if !b.WithdrawAfterTimeout() {
		t.Fatal("20 more successes should pay for one more")
	}
	for range 10 {
		b.Deposit()
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("10 successes after a timeout that was not retried paid for a retry: the timeout spent nothing")
	}
	for range 20 {
		b.Deposit()
	}
	*now += 1100 * time.Millisecond
	if b.WithdrawAfterTimeout() {
		t.Error("successes more than a second old paid for a timeout's retry")
	}
	// Retries after fast failures draw on the last second too.
	b, _ = earned(0.2, 2)
	for range 20 {
		b.Deposit()
	}
	b.Withdraw()
	if b.WithdrawAfterTimeout() {
		t.Error("a fast failure's retry and a timeout's retry were paid from the same credit")
	}
}

// A clock that jumps, back or forward by hours, changes no decision by
// more than the window.
func TestBudgetClockJumps(t *testing.T) {
	for _, jump := range []time.Duration{-5 * time.Hour, 5 * time.Hour} {
		b := newTPSBudget(time.Second, 0, 0.5)
		now := manual(b)
		*now = 10 * time.Hour
		b.Deposit()
		b.Deposit()
		*now += jump
		if jump > 0 && b.Withdraw() {
			t.Errorf("jump %v: deposits a window old paid for a retry", jump)
		}
		b.Deposit()
		b.Deposit()
		*now += 2 * time.Second // a window later, whatever the jump
		if b.Withdraw() {
			t.Errorf("jump %v: deposits more than a window old paid for a retry", jump)
		}
		b.Deposit()
		b.Deposit()
		if !b.Withdraw() {
			t.Errorf("jump %v: fresh deposits did not pay for a retry", jump)
		}
	}
}

func TestNewEarnedBudgetRejects(t *testing.T) {
	tests := []struct {
		ratio float64
		burst int
		field string
		bound string // the bound the value broke, as the error names it
	}{
		{0, 2, "policy.NewEarnedBudget(ratio)", "at least 1e-6"},
		{1.5, 2, "policy.NewEarnedBudget(ratio)", "at most 1 "},
		{math.NaN(), 2, "policy.NewEarnedBudget(ratio)", "at least 1e-6"},
		{1e-7, 2, "policy.NewEarnedBudget(ratio)", "at least 1e-6"},
		{0.2, 0, "policy.NewEarnedBudget(burst)", "at least 1 "},
		{0.2, 1001, "policy.NewEarnedBudget(burst)", "at most 1000 "},
	}
	for _, tt := range tests {
		_, err := NewEarnedBudget(tt.ratio, tt.burst)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(ce.Reason, tt.bound) {
			t.Errorf("NewEarnedBudget(%v, %d) = %v, want a *ConfigError for %s, %q", tt.ratio, tt.burst, err, tt.field, tt.bound)
		}
	}
	if _, err := NewEarnedBudget(1, 1000); err != nil {
		t.Errorf("the widest budget: %v", err)
	}
}

// DepositAt, the retry layer's Deposit with the time it has just read,
// earns what Deposit earns, in the window of that time.
func TestEarnedBudgetDepositAt(t *testing.T) {
	b := newEarnedBudget(0.2, 2)
	for range 19 {
		b.DepositAt(time.Now())
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("19 successes in the last second paid for a timeout's retry; it takes 20")
	}
	b = newEarnedBudget(0.2, 2)
	for range 20 {
		b.DepositAt(time.Now())
	}
	if !b.WithdrawAfterTimeout() || b.WithdrawAfterTimeout() {
		t.Fatal("20 successes in the last second should pay for exactly one timeout's retry")
	}
	// Deposits dated two seconds before the budget's start (a clock
	// reading taken earlier) have expired by now: the window follows the
	// time given, not the time of the call.
	b = newEarnedBudget(0.2, 2)
	for range 20 {
		b.DepositAt(b.recent.start.Add(-2 * time.Second))
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("deposits dated two seconds before now paid for a timeout's retry")
	}
}

// A reading a little older than the window's start (taken before another
// goroutine moved the window on) counts in the current window: it moves
// nothing back, and takes no lock.
func TestBudgetOlderReadingCountsInTheWindow(t *testing.T) {
	b := newTPSBudget(10*time.Second, 0, 0.2)
	now := manual(b)
	*now = 5500 * time.Millisecond
	b.Deposit() // moves the window on: it starts at 5.5 s
	start := b.genAt.Load()
	b.expireAt(int64(5400 * time.Millisecond)) // read 100 ms before that
	if b.genAt.Load() != start {
		t.Fatalf("an older reading moved the window's start from %v to %v", time.Duration(start), time.Duration(b.genAt.Load()))
	}
	b.expireAt(int64(3 * time.Second)) // a clock that went back by more than a window starts it again
	if b.genAt.Load() != int64(3*time.Second) {
		t.Fatalf("a clock back by 2.5 s: window starts at %v, want 3s", time.Duration(b.genAt.Load()))
	}
}

// Alone's budget is Default's without the fleet rule: it has no
// WithdrawAfterTimeout, so the engine pays a timeout's retry from the
// stock, and pays it back when it succeeds.
func TestAloneBudget(t *testing.T) {
	b := Alone().Budget
	if _, ok := b.(interface{ WithdrawAfterTimeout() bool }); ok {
		t.Fatal("Alone's budget keeps the fleet rule for timeouts")
	}
	for _, m := range []string{"Refund", "DepositAt", "Retries"} {
		if _, ok := reflect.TypeOf(b).MethodByName(m); !ok {
			t.Errorf("Alone's budget lacks %s, which Default's has", m)
		}
	}
	if got := withdrawals(b); got != 2 {
		t.Errorf("a new Alone budget: %d retries, want its stock of 2", got)
	}
	if Default().Budget == Default().Budget || Alone().Budget == Alone().Budget {
		t.Error("presets share a budget between calls")
	}
}

// A clock that jumps changes no decision by more than the window: forward,
// the last second's credit expires (as a second of silence would); back,
// credit earned "in the future" counts until the clock catches up, no
// longer than a window would have kept it, and the stock, which no clock
// refills, is untouched either way.
func TestEarnedBudgetClockJumps(t *testing.T) {
	for _, jump := range []time.Duration{time.Hour, -time.Hour, 999 * time.Millisecond, -999 * time.Millisecond} {
		b, now := earned(0.2, 2)
		for range 40 {
			b.Deposit() // 40 successes: 8 retries' worth, and two timeouts' retries
		}
		*now += jump
		retries, timeouts := 0, 0
		for b.WithdrawAfterTimeout() {
			timeouts++
		}
		for b.Withdraw() {
			retries++
		}
		// Never more than without a jump (2 timeouts' retries, stock 2 +
		// what the rest of the second allows); never less than the stock.
		if timeouts > 2 || retries > 10 || retries < 2 {
			t.Errorf("clock jumped %v: %d timeouts' retries and %d retries; want at most 2, and 2 to 10", jump, timeouts, retries)
		}
		if jump < 0 {
			*now -= jump // back to where it was, then on by a window
			*now += 1100 * time.Millisecond
			if b.WithdrawAfterTimeout() {
				t.Errorf("clock jumped %v and came back: credit older than a second paid for a timeout's retry", jump)
			}
		}
	}
}
