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
