// Package storetest is the conformance test every idempotency.Store
// passes: the in-memory store here, the Redis store in its own module, and
// yours.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/idempotency"
)

// Run runs the conformance tests against stores made by newStore, one per
// test. Keys are unique per run, so a shared backend needs no cleaning.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	ctx := context.Background()
	run := time.Now().UnixNano()
	key := func(name string) string { return fmt.Sprintf("storetest-%d-%s", run, name) }
	rec := &idempotency.Record{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`), BodyKept: true, Fingerprint: "fp"}

	t.Run("claim, in flight, complete, replay", func(t *testing.T) {
		s, k := newStore(t), key("flow")
		if got, err := s.Begin(ctx, k, "fp", time.Minute); got != nil || err != nil {
			t.Fatalf("first Begin: %v, %v; want the claim", got, err)
		}
		if _, err := s.Begin(ctx, k, "fp", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("Begin while in flight: %v, want ErrInFlight", err)
		}
		if _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrMismatch) {
			t.Errorf("Begin with another fingerprint while in flight: %v, want ErrMismatch", err)
		}
		if err := s.Complete(ctx, k, rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.Begin(ctx, k, "fp", time.Minute)
		if err != nil || got == nil || got.Status != 201 || !bytes.Equal(got.Body, rec.Body) || got.Header.Get("Content-Type") != "application/json" || !got.BodyKept {
			t.Errorf("Begin after Complete: %+v, %v; want the record", got, err)
		}
		if _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrMismatch) {
			t.Errorf("Begin with another fingerprint after Complete: %v, want ErrMismatch", err)
		}
	})

	t.Run("release frees the key", func(t *testing.T) {
		s, k := newStore(t), key("release")
		s.Begin(ctx, k, "fp", time.Minute)
		if err := s.Release(ctx, k); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Begin(ctx, k, "fp", time.Minute); got != nil || err != nil {
			t.Errorf("Begin after Release: %v, %v; want a new claim", got, err)
		}
	})

	t.Run("release keeps a completed record", func(t *testing.T) {
		s, k := newStore(t), key("release-done")
		s.Begin(ctx, k, "fp", time.Minute)
		s.Complete(ctx, k, rec, time.Minute)
		s.Release(ctx, k)
		if got, _ := s.Begin(ctx, k, "fp", time.Minute); got == nil {
			t.Error("Release dropped a completed record")
		}
	})

	t.Run("an expired lease frees the key", func(t *testing.T) {
		s, k := newStore(t), key("lease")
		s.Begin(ctx, k, "fp", 20*time.Millisecond) // an instance that crashed
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := s.Begin(ctx, k, "fp", time.Minute)
			if err == nil && got == nil {
				return
			}
			if !errors.Is(err, idempotency.ErrInFlight) || time.Now().After(deadline) {
				t.Fatalf("Begin after the lease: %v, %v", got, err)
			}
			time.Sleep(5 * time.Millisecond) // polling until the lease ends: no timing asserted
		}
	})

	t.Run("a late Complete leaves a newer claim alone", func(t *testing.T) {
		s, k := newStore(t), key("late")
		s.Begin(ctx, k, "fp", 20*time.Millisecond) // the first request, whose lease runs out
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := s.Begin(ctx, k, "other", time.Minute) // another request takes the key
			if err == nil && got == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lease never ended: %v, %v", got, err)
			}
			time.Sleep(5 * time.Millisecond) // polling until the lease ends: no timing asserted
		}
		if err := s.Complete(ctx, k, rec, time.Minute); !errors.Is(err, idempotency.ErrMismatch) {
			t.Errorf("the first request's late Complete: %v, want ErrMismatch", err)
		}
		if _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("the newer claim after the late Complete: %v, want it still in flight", err)
		}
	})

	t.Run("one claim among concurrent duplicates", func(t *testing.T) {
		s, k := newStore(t), key("race")
		var mu sync.Mutex
		claims, inFlight := 0, 0
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.Begin(ctx, k, "fp", time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && got == nil:
					claims++
				case errors.Is(err, idempotency.ErrInFlight):
					inFlight++
				default:
					t.Errorf("Begin: %v, %v", got, err)
				}
			}()
		}
		wg.Wait()
		if claims != 1 || inFlight != 15 {
			t.Errorf("%d claims, %d in flight; want 1 and 15", claims, inFlight)
		}
	})
}
