package idempotency

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// A Record is a stored response.
type Record struct {
	Status int
	Header http.Header
	Body   []byte
	// BodyKept is false when the body was larger than the handler's
	// MaxStoredBody: a replay then has the status and headers only.
	BodyKept bool
	// Fingerprint is the request's the record answers: Complete stores it
	// only over a claim with the same one.
	Fingerprint string
}

// A Store keeps the keys of one service. It is safe for concurrent use.
type Store interface {
	// Begin claims key for a request whose fingerprint is fp, for lease.
	// It returns (nil, nil) when the caller now holds the key; the record
	// of a completed request with the same key and fingerprint; or
	// ErrInFlight, ErrMismatch or ErrFull.
	Begin(ctx context.Context, key, fp string, lease time.Duration) (*Record, error)
	// Complete stores rec under key, kept for keep, ending the claim. A
	// key claimed since by a request with another fingerprint (the first
	// one's lease ran out) is left to it: ErrMismatch.
	Complete(ctx context.Context, key string, rec *Record, keep time.Duration) error
	// Release gives up a claim whose request produced no response to keep
	// (its handler panicked), so that a retry runs it again.
	Release(ctx context.Context, key string) error
}

// Errors of Begin: constants, so no program can change them (compare
// with errors.Is).
const (
	ErrInFlight storeError = "idempotency: a request with this key is in flight"
	ErrMismatch storeError = "idempotency: the key was used for another request"
	ErrFull     storeError = "idempotency: the store is full"
)

// storeError is the type of the errors of Begin.
type storeError string

func (e storeError) Error() string { return string(e) }

// MemoryStore keeps keys in memory: for one instance and for tests. Its
// zero value is not usable; use NewMemoryStore.
type MemoryStore struct {
	mu      sync.Mutex
	entries map[string]*entry
	max     int
	now     func() time.Time
}

type entry struct {
	fp      string
	rec     *Record   // nil while in flight
	expires time.Time // the lease's end while in flight, the record's after
}

// NewMemoryStore returns a store of at most maxKeys keys (0 means 100 000).
// When it is full, expired keys make room; if none has expired, Begin
// returns ErrFull (the handler answers 503) rather than forget a key that
// may still protect a write. now is the clock (nil: time.Now).
func NewMemoryStore(maxKeys int, now func() time.Time) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{entries: map[string]*entry{}, max: maxKeys, now: now}
}

func (s *MemoryStore) Begin(_ context.Context, key, fp string, lease time.Duration) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.entries[key]; ok && now.Before(e.expires) {
		switch {
		case e.fp != fp:
			return nil, ErrMismatch
		case e.rec == nil:
			return nil, ErrInFlight
		}
		return e.rec, nil
	}
	if len(s.entries) >= s.max {
		for k, e := range s.entries {
			if !now.Before(e.expires) {
				delete(s.entries, k)
			}
		}
		if len(s.entries) >= s.max {
			return nil, ErrFull
		}
	}
	s.entries[key] = &entry{fp: fp, expires: now.Add(lease)}
	return nil, nil
}

func (s *MemoryStore) Complete(_ context.Context, key string, rec *Record, keep time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	switch {
	case !ok:
		return errors.New("idempotency: Complete of a key not begun")
	case e.fp != rec.Fingerprint:
		return ErrMismatch
	}
	e.rec, e.expires = rec, s.now().Add(keep)
	return nil
}

func (s *MemoryStore) Release(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok && e.rec == nil {
		delete(s.entries, key)
	}
	return nil
}
