package idempotency_test

import (
	"context"
	"errors"
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
	if _, err := s.Begin(ctx, "c", "fp", time.Minute); !errors.Is(err, idempotency.ErrFull) {
		t.Fatalf("full: %v, want ErrFull", err)
	}
	now = now.Add(2 * time.Second) // b's lease is over
	if got, err := s.Begin(ctx, "c", "fp", time.Minute); got != nil || err != nil {
		t.Errorf("after b expired: %v, %v; want a claim", got, err)
	}
}
