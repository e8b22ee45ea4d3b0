package idempotency

import (
	"container/heap"
	"container/list"
	"context"
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
}

// A Store keeps the keys of one service. It is safe for concurrent use.
type Store interface {
	// Begin claims key for a request whose fingerprint is fp, for lease.
	// It returns the claim when the caller now holds the key; the record
	// of a completed request with the same key and fingerprint; or
	// ErrInFlight, ErrMismatch or ErrFull (any other error: the store
	// failed, and the handler does not run).
	Begin(ctx context.Context, key, fp string, lease time.Duration) (Claim, *Record, error)
}

// A Claim is one request's hold on its key. Only its holder completes or
// releases it: once its lease has ended and another request has claimed
// the key, Complete stores nothing (ErrInFlight) and Release leaves the
// other request's claim alone.
//
// A claim whose Complete commits the handler's own writes (stores/postgres)
// also has a method Commits() bool that returns true: Handler then holds
// the whole answer until Complete returns, however large it is and
// whether or not the handler flushes, since an answer sent before a
// commit that fails would tell the client of a write that never happened.
type Claim interface {
	// Context returns the context the handler runs under, made from ctx.
	// A store that commits the handler's own writes with the record puts
	// its transaction there (stores/postgres); the others return ctx.
	Context(ctx context.Context) context.Context
	// Complete stores rec, kept for keep, ending the claim. It stores it
	// also when the claim's lease has ended and no other request has
	// claimed the key since. A transactional store commits the handler's
	// writes with rec, and returns nil with nothing stored when the
	// handler rolled them back; ErrNotCommitted when the commit failed.
	Complete(ctx context.Context, rec *Record, keep time.Duration) error
	// Release gives up a claim whose request produced no response to keep
	// (its handler panicked), so that a retry runs it again. A
	// transactional store rolls the handler's writes back.
	Release(ctx context.Context) error
}

// Errors of a Store: constants, so no program can change them (compare
// with errors.Is).
const (
	ErrInFlight storeError = "idempotency: a request with this key is in flight"
	ErrMismatch storeError = "idempotency: the key was used for another request"
	ErrFull     storeError = "idempotency: the store is full"
	// ErrNotCommitted is Complete's error when neither the record nor the
	// handler's writes committed (a transactional store): Handler then
	// answers 503 in place of the handler's answer, and a retry runs the
	// handler again.
	ErrNotCommitted storeError = "idempotency: the request's writes did not commit"
)

// storeError is the type of the errors of a Store.
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
// their lease, completed answers both by the end of their keep (handlers
// sharing the store may keep theirs for a minute or a day) and by
// completion, oldest first.
type MemoryStore struct {
	mu       sync.Mutex
	entries  map[string]*entry
	inFlight leases    // claims, the earliest lease end first
	kept     leases    // completed answers, the earliest keep end first
	done     list.List // of *entry, oldest completion first
	max      int
	now      func() time.Time
}

type entry struct {
	key     string
	fp      string
	owner   *memoryClaim  // the claim that made it
	rec     *Record       // nil while in flight
	expires time.Time     // the lease's end while in flight, the record's after
	at      *list.Element // in done, once completed
	i       int           // in inFlight while in flight, in kept once completed
}

// leases is a heap of entries by their end: the claims in flight by the
// end of their lease, or the completed answers by the end of their keep.
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
	s.unlist(e)
}

// unlist takes e out of the lists that order it for makeRoom.
func (s *MemoryStore) unlist(e *entry) {
	if e.rec == nil {
		heap.Remove(&s.inFlight, e.i)
	} else {
		heap.Remove(&s.kept, e.i)
		s.done.Remove(e.at)
	}
}

// makeRoom frees one key, if it can without forgetting a claim whose
// lease runs: an ended lease first, then an ended keep (whatever its
// length: the earliest end first), then the oldest completed answer.
func (s *MemoryStore) makeRoom(now time.Time) bool {
	if len(s.inFlight) > 0 && !now.Before(s.inFlight[0].expires) {
		s.forget(s.inFlight[0])
		return true
	}
	if len(s.kept) > 0 && !now.Before(s.kept[0].expires) {
		s.forget(s.kept[0])
		return true
	}
	if f := s.done.Front(); f != nil {
		s.forget(f.Value.(*entry))
		return true
	}
	return false
}

func (s *MemoryStore) Begin(_ context.Context, key, fp string, lease time.Duration) (Claim, *Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.entries[key]; ok {
		if now.Before(e.expires) {
			switch {
			case e.fp != fp:
				return nil, nil, ErrMismatch
			case e.rec == nil:
				return nil, nil, ErrInFlight
			}
			return nil, e.rec, nil
		}
		s.forget(e) // its lease or keep ended
	}
	for len(s.entries) >= s.max {
		if !s.makeRoom(now) {
			return nil, nil, ErrFull // every key held is in flight
		}
	}
	c := &memoryClaim{s: s, key: key, fp: fp}
	e := &entry{key: key, fp: fp, owner: c, expires: now.Add(lease)}
	heap.Push(&s.inFlight, e)
	s.entries[key] = e
	return c, nil, nil
}

// memoryClaim is a claim of a MemoryStore: the entry it made names it as
// its owner.
type memoryClaim struct {
	s       *MemoryStore
	key, fp string
}

func (c *memoryClaim) Context(ctx context.Context) context.Context { return ctx }

func (c *memoryClaim) Complete(_ context.Context, rec *Record, keep time.Duration) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, ok := s.entries[c.key]
	if ok && e.owner != c {
		if now.Before(e.expires) {
			return ErrInFlight // another request claimed the key once this claim's lease ended
		}
		s.forget(e)
		ok = false
	}
	if ok {
		s.unlist(e)
	} else {
		// The lease ended and the key was forgotten, but nobody claimed
		// it since: this request is still the last to run, and its answer
		// is the one to replay.
		for len(s.entries) >= s.max {
			if !s.makeRoom(now) {
				return ErrFull
			}
		}
		e = &entry{key: c.key, fp: c.fp, owner: c}
		s.entries[c.key] = e
	}
	e.rec, e.expires = rec, now.Add(keep)
	heap.Push(&s.kept, e)
	e.at = s.done.PushBack(e)
	return nil
}

func (c *memoryClaim) Release(context.Context) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[c.key]; ok && e.owner == c && e.rec == nil {
		s.forget(e)
	}
	return nil
}
