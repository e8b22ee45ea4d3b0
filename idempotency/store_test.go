package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/idempotency/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) idempotency.Store { return idempotency.NewMemoryStore(0, nil) })
}

// A full store makes room with expired keys, and otherwise refuses rather
// than forget a key that may still protect a write.
func TestMemoryStoreBound(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := idempotency.NewMemoryStore(2, func() time.Time { return now })
	ctx := context.Background()
	s.Begin(ctx, "a", "fp", time.Minute)
	s.Begin(ctx, "b", "fp", time.Second)
	if _, _, err := s.Begin(ctx, "c", "fp", time.Minute); !errors.Is(err, idempotency.ErrFull) {
		t.Fatalf("full: %v, want ErrFull", err)
	}
	now = now.Add(2 * time.Second) // b's lease is over
	if c, got, err := s.Begin(ctx, "c", "fp", time.Minute); c == nil || got != nil || err != nil {
		t.Errorf("after b expired: %v, %v, %v; want a claim", c, got, err)
	}
}

// Keyed writes at a steady rate never fill the store for a day: past its
// bound it forgets the oldest completed answers first, and refuses only
// when every key it holds is in flight.
func TestMemoryStoreForgetsTheOldestAnswersFirst(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := idempotency.NewMemoryStore(100, func() time.Time { return now })
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	for i := range 1000 { // ten times the bound, one a second, kept 24 h
		c, _, err := s.Begin(ctx, key(i), "fp", time.Minute)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if err := c.Complete(ctx, &idempotency.Record{Status: 201}, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	if _, rec, err := s.Begin(ctx, key(999), "fp", time.Minute); rec == nil || err != nil {
		t.Errorf("the newest answer: %v, %v; want it replayed", rec, err)
	}
	if _, rec, err := s.Begin(ctx, key(0), "fp", time.Minute); rec != nil || err != nil {
		t.Errorf("the oldest answer: %v, %v; want it forgotten (a new claim)", rec, err)
	}
	// Every key in flight: refused, never a claim forgotten.
	full := idempotency.NewMemoryStore(2, func() time.Time { return now })
	full.Begin(ctx, "a", "fp", time.Minute)
	full.Begin(ctx, "b", "fp", time.Minute)
	if _, _, err := full.Begin(ctx, "c", "fp", time.Minute); !errors.Is(err, idempotency.ErrFull) {
		t.Errorf("every key in flight: %v, want ErrFull", err)
	}
}

// A claim whose lease ended and whose key the store then forgot to make
// room still stores its answer when nobody claimed the key since: it is
// the last run of the write, and a retry must get its answer, not run it
// again.
func TestMemoryStoreLateCompleteAfterEviction(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := idempotency.NewMemoryStore(1, func() time.Time { return now })
	ctx := context.Background()
	a, _, _ := s.Begin(ctx, "a", "fp", time.Second)
	now = now.Add(2 * time.Second)
	b, _, err := s.Begin(ctx, "b", "fp", time.Minute) // forgets a's ended claim to make room
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Complete(ctx, &idempotency.Record{Status: 201}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, &idempotency.Record{Status: 202}, time.Hour); err != nil {
		t.Fatalf("a's late Complete: %v", err)
	}
	if _, rec, err := s.Begin(ctx, "a", "fp", time.Minute); rec == nil || rec.Status != 202 || err != nil {
		t.Errorf("a's retry: %+v, %v; want a's answer replayed", rec, err)
	}
}

// Handlers that share one store with different keeps (orders kept a day,
// carts a minute): when it is full, the ended cart answers go first, not
// the live order answer that happens to be the oldest. Forgetting the
// order would let its retry run the write again. (Issue 36.)
func TestMemoryStoreForgetsEndedKeepsFirstUnderMixedKeeps(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := idempotency.NewMemoryStore(3, func() time.Time { return now })
	ctx := context.Background()
	complete := func(key string, keep time.Duration) {
		t.Helper()
		c, _, err := s.Begin(ctx, key, "fp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Complete(ctx, &idempotency.Record{Status: 201}, keep); err != nil {
			t.Fatal(err)
		}
	}
	complete("order-1", 24*time.Hour)
	now = now.Add(time.Second)
	complete("cart-1", time.Minute)
	now = now.Add(time.Second)
	complete("cart-2", time.Minute)
	now = now.Add(2 * time.Minute) // both carts' keeps have ended; the order's runs
	complete("order-2", 24*time.Hour)
	complete("order-3", 24*time.Hour)
	for _, key := range []string{"order-1", "order-2", "order-3"} {
		if _, rec, err := s.Begin(ctx, key, "fp", time.Minute); rec == nil || err != nil {
			t.Errorf("%s: %v, %v; want its answer replayed", key, rec, err)
		}
	}
}

// The same under mixed leases and keeps: a claim whose short lease ended
// and a cart whose keep ended both go before a live answer or a claim
// whose long lease runs.
func TestMemoryStoreMixedLeasesAndKeeps(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := idempotency.NewMemoryStore(4, func() time.Time { return now })
	ctx := context.Background()
	order, _, _ := s.Begin(ctx, "order", "fp", time.Minute)
	order.Complete(ctx, &idempotency.Record{Status: 201}, 24*time.Hour)
	s.Begin(ctx, "report", "fp", time.Hour) // a long handler, still running
	s.Begin(ctx, "ping", "fp", time.Second) // its handler died: the lease ends
	cart, _, _ := s.Begin(ctx, "cart", "fp", time.Minute)
	cart.Complete(ctx, &idempotency.Record{Status: 201}, time.Minute)
	now = now.Add(2 * time.Minute)
	for _, key := range []string{"a", "b"} { // two new keys: room for both from what ended
		if c, _, err := s.Begin(ctx, key, "fp", time.Minute); c == nil || err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	if _, rec, err := s.Begin(ctx, "order", "fp", time.Minute); rec == nil || err != nil {
		t.Errorf("order: %v, %v; want its answer replayed", rec, err)
	}
	if _, _, err := s.Begin(ctx, "report", "fp", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
		t.Errorf("report: %v; want it still in flight", err)
	}
}
