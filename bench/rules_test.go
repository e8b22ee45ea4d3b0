package bench

import (
	"testing"
	"time"
)

// clock is a test's clock: it moves only when told.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) step(d time.Duration)    { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_000_000, 0)} }
func withClock(b *wave4Budget, c *clock) { b.now = c.now }

// drain withdraws until the budget refuses, and says how many it paid.
func drain(b interface{ Withdraw() bool }) int {
	n := 0
	for b.Withdraw() {
		n++
	}
	return n
}

func TestWave4Budget(t *testing.T) {
	c := newClock()
	b := newWave4Budget()
	withClock(b, c)
	if n := drain(b); n != 2 {
		t.Fatalf("a new budget holds %d retries, want 2", n)
	}
	for range 5 {
		b.Deposit() // 5 × 0.2: one retry
	}
	if n := drain(b); n != 1 {
		t.Fatalf("five deposits earned %d retries, want 1", n)
	}
	b.Refund()
	b.Refund() // wave 4 paid back one retry an operation
	if n := drain(b); n != 1 {
		t.Fatalf("an operation's refunds paid back %d retries, want 1", n)
	}
	for range 3 {
		b.Deposit()
		b.Refund()
	}
	if n := drain(b); n != 2 {
		t.Fatalf("refunds filled the stock to %d retries, want its cap of 2", n)
	}
	// A timeout's retry needs 20 deposits in the last second.
	c.step(2 * time.Second)
	for range 19 {
		b.Deposit()
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry paid by 19 deposits")
	}
	c.step(2 * time.Second)
	for range 20 {
		b.Deposit()
	}
	if !b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry refused after 20 deposits in the last second")
	}
	if b.WithdrawAfterTimeout() {
		t.Fatal("the last second's credit paid twice")
	}
	c.step(1100 * time.Millisecond)
	for range 20 {
		b.Deposit()
	}
	c.step(1100 * time.Millisecond)
	if b.WithdrawAfterTimeout() {
		t.Fatal("credit older than a second paid a timeout's retry")
	}
}

func TestSketchBudget(t *testing.T) {
	c := newClock()
	b := newSketchBudget(10 * time.Second)
	withClock(b, c)
	if b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry paid with no deposit yet")
	}
	b.Deposit()
	c.step(time.Second)
	if !b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry refused a second after a deposit")
	}
	b.Deposit()
	c.step(5 * time.Second)
	b.Deposit()
	if b.WithdrawAfterTimeout() {
		t.Fatal("two stock-paid timeout retries within 10 s")
	}
	c.step(5 * time.Second)
	b.Deposit()
	if !b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry refused 10 s after the last one")
	}
	c.step(20 * time.Second)
	if b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry paid 20 s after the last deposit")
	}
	// The stock bounds it too: two retries, then five deposits for one.
	c.step(20 * time.Second)
	b.Deposit()
	drain(b)
	if b.WithdrawAfterTimeout() {
		t.Fatal("a timeout's retry paid from an empty stock")
	}
}

func TestAWSQuota(t *testing.T) {
	q := newAWSQuota()
	if n := drain(q); n != 100 {
		t.Fatalf("500 tokens paid %d retries, want 100", n)
	}
	for range 15 {
		q.Deposit()
	}
	if !q.WithdrawAfterTimeout() {
		t.Fatal("15 tokens did not pay a timeout's retry (10)")
	}
	if q.WithdrawAfterTimeout() {
		t.Fatal("5 tokens paid a timeout's retry")
	}
	if n := drain(q); n != 1 {
		t.Fatalf("5 tokens paid %d retries, want 1", n)
	}
	q = newAWSQuota()
	q.Deposit()
	n := 0
	for q.WithdrawAfterTimeout() {
		n++
	}
	if n != 50 {
		t.Fatalf("a full quota paid %d timeouts' retries, want 50 (the cap is 500)", n)
	}
}
