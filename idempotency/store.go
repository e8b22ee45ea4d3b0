package idempotency

import (
	"container/heap"
	"container/list"
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
//
// It holds at most maxKeys keys. Under pressure it forgets first the keys
// whose lease or keep has ended, then the oldest completed answers, even
// before their keep ends (a retry comes within minutes, not a day), and
// refuses a new key (ErrFull: the handler answers 503) only when every key
// it holds is in flight. The replay window it really gives is therefore
// the shorter of Config.Keep and maxKeys divided by the rate of keyed
// writes: 100 000 keys at 1.2 writes a second last 23 h, at 100 a second
// 17 min. Making room never scans the keys: claims are kept by the end of
// their lease, completed answers by completion, oldest first.
type MemoryStore struct {
	mu       sync.Mutex
	entries  map[string]*entry
	inFlight leases    // claims, the earliest lease end first
	done     list.List // of *entry, oldest completion first
	max      int
	now      func() time.Time
}

type entry struct {
	key     string
	fp      string
	rec     *Record       // nil while in flight
	expires time.Time     // the lease's end while in flight, the record's after
	at      *list.Element // in done, once completed
	i       int           // in inFlight, while in flight
}

// leases is a heap of the claims in flight by the end of their lease.
type leases []*entry

func (h leases) Len() int           { return len(h) }
func (h leases) Less(a, b int) bool { return h[a].expires.Before(h[b].expires) }
func (h leases) Swap(a, b int)      { h[a], h[b] = h[b], h[a]; h[a].i = a; h[b].i = b }
func (h *leases) Push(x any)        { e := x.(*entry); e.i = len(*h); *h = append(*h, e) }
func (h *leases) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// NewMemoryStore returns a store of at most maxKeys keys (0 means
// 100 000). now is the clock (nil: time.Now).
func NewMemoryStore(maxKeys int, now func() time.Time) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{entries: map[string]*entry{}, max: maxKeys, now: now}
}

// forget drops e from the map and its list.
func (s *MemoryStore) forget(e *entry) {
	delete(s.entries, e.key)
	if e.rec == nil {
		heap.Remove(&s.inFlight, e.i)
	} else {
		s.done.Remove(e.at)
	}
}

// makeRoom frees one key, if it can without forgetting a claim whose
// lease runs: an ended lease first, then an ended keep, then the oldest
// completed answer.
func (s *MemoryStore) makeRoom(now time.Time) bool {
	if len(s.inFlight) > 0 && !now.Before(s.inFlight[0].expires) {
		s.forget(s.inFlight[0])
		return true
	}
	if f := s.done.Front(); f != nil {
		s.forget(f.Value.(*entry))
		return true
	}
	return false
}

func (s *MemoryStore) Begin(_ context.Context, key, fp string, lease time.Duration) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.entries[key]; ok {
		if now.Before(e.expires) {
			switch {
			case e.fp != fp:
				return nil, ErrMismatch
			case e.rec == nil:
				return nil, ErrInFlight
			}
			return e.rec, nil
		}
		s.forget(e) // its lease or keep ended
	}
	for len(s.entries) >= s.max {
		if !s.makeRoom(now) {
			return nil, ErrFull // every key held is in flight
		}
	}
	e := &entry{key: key, fp: fp, expires: now.Add(lease)}
	heap.Push(&s.inFlight, e)
	s.entries[key] = e
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
	if e.rec == nil {
		heap.Remove(&s.inFlight, e.i)
	} else {
		s.done.Remove(e.at)
	}
	e.rec, e.expires = rec, s.now().Add(keep)
	e.at = s.done.PushBack(e)
	return nil
}

func (s *MemoryStore) Release(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok && e.rec == nil {
		s.forget(e)
	}
	return nil
}
