// Package storetest is the conformance test every idempotency.Store
// passes: the in-memory store here, the Redis and Postgres stores in
// modules of their own, and yours.
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
// Every claim a case makes is completed or released before it ends.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	run := time.Now().UnixNano()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore(t), fmt.Sprintf("storetest-%d-%s", run, c.name))
		})
	}
}

var ctx = context.Background()

// rec is the record the cases store; other is a second request's.
var (
	rec   = &idempotency.Record{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`), BodyKept: true}
	other = &idempotency.Record{Status: 201, Body: []byte(`{"id":2}`), BodyKept: true}
)

// The cases, one table for every store.
var cases = []struct {
	name string
	run  func(t *testing.T, s idempotency.Store, key string)
}{
	{"claim-complete-replay", func(t *testing.T, s idempotency.Store, k string) {
		c := mustClaim(t, s, k, "fp", time.Minute)
		if _, _, err := s.Begin(ctx, k, "fp", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("Begin while in flight: %v, want ErrInFlight", err)
		}
		if _, _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrMismatch) {
			t.Errorf("Begin with another fingerprint while in flight: %v, want ErrMismatch", err)
		}
		if err := c.Complete(ctx, rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		wantRecord(t, s, k, "fp", rec)
		if _, _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrMismatch) {
			t.Errorf("Begin with another fingerprint after Complete: %v, want ErrMismatch", err)
		}
	}},
	{"header-bytes-kept", func(t *testing.T, s idempotency.Store, k string) {
		// A Latin-1 filename, two values of one field: a replay is the
		// answer as it was, byte for byte.
		r := &idempotency.Record{Status: 200, BodyKept: true, Header: http.Header{
			"Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""},
			"Set-Cookie":          {"a=1", "b=2"},
		}}
		c := mustClaim(t, s, k, "fp", time.Minute)
		if err := c.Complete(ctx, r, time.Minute); err != nil {
			t.Fatal(err)
		}
		_, got, err := s.Begin(ctx, k, "fp", time.Minute)
		if err != nil || got == nil || got.Header.Get("Content-Disposition") != r.Header.Get("Content-Disposition") || len(got.Header["Set-Cookie"]) != 2 || got.Header["Set-Cookie"][1] != "b=2" {
			t.Errorf("the replayed header: %q, %v; want %q", got.Header, err, r.Header)
		}
	}},
	{"context-keeps-values", func(t *testing.T, s idempotency.Store, k string) {
		type mark struct{}
		c := mustClaim(t, s, k, "fp", time.Minute)
		defer c.Release(ctx)
		if got := c.Context(context.WithValue(ctx, mark{}, 1)); got == nil || got.Value(mark{}) != 1 {
			t.Errorf("Claim.Context lost the request's values: %v", got)
		}
	}},
	{"release-frees-the-key", func(t *testing.T, s idempotency.Store, k string) {
		c := mustClaim(t, s, k, "fp", time.Minute)
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, k, "fp", time.Minute)
	}},
	{"release-keeps-a-record", func(t *testing.T, s idempotency.Store, k string) {
		c := mustClaim(t, s, k, "fp", time.Minute)
		if err := c.Complete(ctx, rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		c.Release(ctx)
		wantRecord(t, s, k, "fp", rec)
	}},
	{"an-ended-lease-frees-the-key", func(t *testing.T, s idempotency.Store, k string) {
		mustClaim(t, s, k, "fp", 20*time.Millisecond) // an instance that crashed
		afterLease(t, s, k, "fp")
	}},
	{"a-late-complete-leaves-a-newer-claim", func(t *testing.T, s idempotency.Store, k string) {
		a := mustClaim(t, s, k, "fp", 20*time.Millisecond) // outlives its lease
		b := afterLease(t, s, k, "fp")                     // takes the key
		if err := a.Complete(ctx, rec, time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("the first request's late Complete: %v, want ErrInFlight", err)
		}
		if _, _, err := s.Begin(ctx, k, "fp", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("after the late Complete: %v, want the newer claim still in flight", err)
		}
		if err := b.Complete(ctx, other, time.Minute); err != nil {
			t.Fatalf("the newer claim's Complete: %v", err)
		}
		wantRecord(t, s, k, "fp", other)
	}},
	{"a-late-complete-of-another-fingerprint", func(t *testing.T, s idempotency.Store, k string) {
		a := mustClaim(t, s, k, "fp", 20*time.Millisecond)
		afterLease(t, s, k, "other")
		if err := a.Complete(ctx, rec, time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("the first request's late Complete: %v, want ErrInFlight", err)
		}
		if _, _, err := s.Begin(ctx, k, "other", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("after the late Complete: %v, want the newer claim still in flight", err)
		}
	}},
	{"a-late-release-leaves-a-newer-claim", func(t *testing.T, s idempotency.Store, k string) {
		// A outlives its lease, B takes the key and runs, A's handler
		// panics: A's Release must not free the key for a third run.
		a := mustClaim(t, s, k, "fp", 20*time.Millisecond)
		b := afterLease(t, s, k, "fp")
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Begin(ctx, k, "fp", time.Minute); !errors.Is(err, idempotency.ErrInFlight) {
			t.Errorf("after the late Release: %v, want the newer claim still in flight", err)
		}
		if err := b.Complete(ctx, other, time.Minute); err != nil {
			t.Fatal(err)
		}
		wantRecord(t, s, k, "fp", other)
	}},
	{"a-late-complete-nobody-claimed-since", func(t *testing.T, s idempotency.Store, k string) {
		// The lease ended but no other request came: this one is still
		// the last to run, and its answer is the one to replay; dropping
		// it would run the write again on the retry.
		a := mustClaim(t, s, k, "fp", 20*time.Millisecond)
		waitLease(t)
		if err := a.Complete(ctx, rec, time.Minute); err != nil {
			t.Fatalf("a late Complete with the key free: %v", err)
		}
		wantRecord(t, s, k, "fp", rec)
	}},
	{"one-claim-among-duplicates", func(t *testing.T, s idempotency.Store, k string) {
		var mu sync.Mutex
		claims, inFlight := 0, 0
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				c, got, err := s.Begin(ctx, k, "fp", time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && c != nil && got == nil:
					claims++
					t.Cleanup(func() { c.Release(ctx) })
				case errors.Is(err, idempotency.ErrInFlight):
					inFlight++
				default:
					t.Errorf("Begin: %v, %v, %v", c, got, err)
				}
			})
		}
		wg.Wait()
		if claims != 1 || inFlight != 15 {
			t.Errorf("%d claims, %d in flight; want 1 and 15", claims, inFlight)
		}
	}},
}

func mustClaim(t *testing.T, s idempotency.Store, k, fp string, lease time.Duration) idempotency.Claim {
	t.Helper()
	c, got, err := s.Begin(ctx, k, fp, lease)
	if err != nil || got != nil || c == nil {
		t.Fatalf("Begin %s: %v, %v, %v; want a claim", k, c, got, err)
	}
	t.Cleanup(func() { c.Release(ctx) }) // a store may hold a connection per claim
	return c
}

func wantRecord(t *testing.T, s idempotency.Store, k, fp string, want *idempotency.Record) {
	t.Helper()
	c, got, err := s.Begin(ctx, k, fp, time.Minute)
	if err != nil || c != nil || got == nil || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) ||
		got.BodyKept != want.BodyKept || got.Header.Get("Content-Type") != want.Header.Get("Content-Type") {
		t.Errorf("Begin after Complete: %v, %+v, %v; want the record %+v", c, got, err, want)
	}
}

// waitLease lets a 20 ms lease end (it waits, and asserts no timing).
func waitLease(t *testing.T) {
	t.Helper()
	time.Sleep(40 * time.Millisecond)
}

// afterLease claims k for fp once the lease before it has ended: it asks
// until then, and asserts no timing.
func afterLease(t *testing.T, s idempotency.Store, k, fp string) idempotency.Claim {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, got, err := s.Begin(ctx, k, fp, time.Minute)
		if err == nil && got == nil && c != nil {
			t.Cleanup(func() { c.Release(ctx) })
			return c
		}
		if !errors.Is(err, idempotency.ErrInFlight) && !errors.Is(err, idempotency.ErrMismatch) || time.Now().After(deadline) {
			t.Fatalf("Begin after the lease: %v, %v, %v", c, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
