package wire

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// ReplayBudget is the bytes a client's replay buffers may hold at once,
// shared by its operations (gRPC's per-client retry buffer).
type ReplayBudget struct{ left atomic.Int64 }

// NewReplayBudget returns a budget of total bytes.
func NewReplayBudget(total int64) *ReplayBudget {
	b := new(ReplayBudget)
	b.left.Store(total)
	return b
}

func (b *ReplayBudget) take(n int64) bool {
	for {
		left := b.left.Load()
		if left < n {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

func (b *ReplayBudget) give(n int64) { b.left.Add(n) }

// errNotReplayable is what a replayed body's reader returns once the body
// could not be kept for a replay: it outgrew the replay buffer, or its
// Seek failed.
var errNotReplayable = errors.New("retrystack: the request body outgrew the replay buffer")

var errRetired = errors.New("retrystack: a later attempt replays this request body")

// A Replay makes a request body that has no GetBody sendable again, in
// order of preference (docs/reliability.md):
//   - a body that can Seek and ReadAt (an *os.File) is read again from
//     where it started, by any number of readers at once;
//   - one that can only Seek is rewound, for one reader at a time;
//   - any other is kept as it is sent, up to a per-request limit and
//     within a per-client budget, and replayed from what was kept, then
//     from where the caller's body stands (gRPC A6's retry buffer). Once
//     it outgrows either, only the reader that went past the limit reads
//     on, and the body cannot be replayed.
//
// The caller's body is closed once the operation is Done and every reader
// the transport was given is closed. Safe for concurrent use.
type Replay struct {
	// pull serialises the reads of the caller's body; mu guards the rest
	// and is never held across such a read, so a reader blocked on a
	// stalled body never blocks Close, Retire or a reader of what was
	// kept (HTTP/2 aborts a send by closing its body during the Read).
	pull    sync.Mutex
	mu      sync.Mutex
	src     io.ReadCloser
	seeker  io.Seeker   // nil for a kept body
	at      io.ReaderAt // non-nil: readers read sections, concurrently
	start   int64       // where a seekable body started
	size    int64       // the section's length (with at)
	rewound bool        // the seekable body is at start for the next reader
	failed  bool        // a Seek failed: not replayable
	seekErr error       // why, naming the Seek

	kept   []byte // what was read, from the start
	limit  int
	budget *ReplayBudget
	held   int64 // taken from budget
	over   *replayReader
	srcErr error // the caller's body ended: its last error
	gen    int   // readers of an earlier attempt are retired

	refs     int  // readers not yet closed, plus the operation's
	done     bool // the operation is done: the budget is given back
	released bool // the caller's body is closed: no reader may start
}

var keptPool = sync.Pool{New: func() any { return new([]byte) }}

// NewReplay returns a replay of body, kept up to limit bytes within
// budget when it cannot seek.
func NewReplay(body io.ReadCloser, limit int, budget *ReplayBudget) *Replay {
	r := &Replay{src: body, limit: limit, budget: budget, refs: 1}
	if s, ok := body.(io.Seeker); ok {
		start, err := s.Seek(0, io.SeekCurrent)
		if err != nil {
			r.fail(err)
			return r
		}
		r.seeker, r.start, r.rewound = s, start, true
		if at, ok := body.(io.ReaderAt); ok {
			if end, err := s.Seek(0, io.SeekEnd); err == nil {
				if _, err := s.Seek(start, io.SeekStart); err != nil {
					r.fail(err) // left at its end: nothing to send
					return r
				}
				r.at, r.size = at, end-start
			}
		}
		return r
	}
	r.kept = (*keptPool.Get().(*[]byte))[:0]
	return r
}

// Concurrent reports whether several readers may read the body at once
// (a hedge's sends): a seekable body read by sections, or a kept one.
func (r *Replay) Concurrent() bool { return r.at != nil || r.seeker == nil }

// fail marks the body not replayable because a Seek failed with err.
func (r *Replay) fail(err error) {
	r.failed = true
	r.seekErr = fmt.Errorf("retrystack: the request body cannot be sent again: rewinding it: %w", err)
}

// Replayable reports whether the body can be sent again.
func (r *Replay) Replayable() bool { return r.Err() == nil }

// Err is why the body cannot be sent again (its Seek failed, or it
// outgrew the replay buffer), or nil.
func (r *Replay) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.failed:
		return r.seekErr
	case r.over != nil:
		return errNotReplayable
	}
	return nil
}

// Rewind prepares a body that can only Seek for the next reader now,
// before a retry is planned, so that a Seek that fails ends the replays
// while the last attempt's answer is still in hand; it retires the
// readers given so far. It returns Err. A body read by sections or kept
// needs no rewinding. When a retired reader is still in a Read (a
// transport's writer that outlived its attempt), the body is rewound by
// the next Reader instead, as it would be without Rewind.
func (r *Replay) Rewind() error {
	if r.seeker == nil || r.at != nil {
		return r.Err()
	}
	if !r.pull.TryLock() {
		return r.Err()
	}
	defer r.pull.Unlock()
	r.mu.Lock()
	r.gen++ // a retired reader that takes pull after this fails (Read)
	if !r.failed && !r.rewound {
		if _, err := r.seeker.Seek(r.start, io.SeekStart); err != nil {
			r.fail(err)
		} else {
			r.rewound = true
		}
	}
	r.mu.Unlock()
	return r.Err()
}

// Retire ends the readers given so far: a read by one of them (a
// transport's writer that outlived its attempt) fails, and cannot take
// the body past its limit from the next attempt's reader.
func (r *Replay) Retire() {
	r.mu.Lock()
	r.gen++
	r.mu.Unlock()
}

// Reader returns a reader of the body from its start.
func (r *Replay) Reader() (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.failed:
		return nil, r.seekErr
	case r.released:
		return nil, errNotReplayable
	case r.at != nil:
		r.refs++
		return &sectionReader{SectionReader: io.NewSectionReader(r.at, r.start, r.size), r: r}, nil
	case r.seeker != nil:
		if !r.rewound {
			if _, err := r.seeker.Seek(r.start, io.SeekStart); err != nil {
				r.fail(err)
				return nil, r.seekErr
			}
		}
		r.rewound = false
	case r.over != nil:
		return nil, errNotReplayable
	}
	r.refs++
	return &replayReader{r: r, gen: r.gen}, nil
}

// GetBody is Reader as a Request.GetBody.
func (r *Replay) GetBody() (io.ReadCloser, error) { return r.Reader() }

// Done ends the operation's hold on the body: what it kept leaves the
// client's budget now, even if a transport never closes a reader.
func (r *Replay) Done() {
	r.mu.Lock()
	r.done = true
	if r.budget != nil {
		r.budget.give(r.held)
		r.held = 0
	}
	r.mu.Unlock()
	r.release()
}

// release drops one hold; the last closes the caller's body and pools
// what was kept, under mu, so no reader copies from it afterwards.
func (r *Replay) release() {
	r.mu.Lock()
	r.refs--
	if r.refs > 0 || r.released {
		r.mu.Unlock()
		return
	}
	r.released = true
	if r.kept != nil {
		if cap(r.kept) <= 2*r.limit {
			k := r.kept[:0]
			keptPool.Put(&k)
		}
		r.kept = nil
	}
	r.mu.Unlock()
	r.src.Close() // ends a read blocked in it
}

type replayReader struct {
	r      *Replay
	pos    int
	gen    int
	closed bool
}

func (rd *replayReader) Read(p []byte) (int, error) {
	r := rd.r
	if n, done, err := rd.fromKept(p); done {
		return n, err
	}
	if r.seeker != nil {
		// Rewound for this reader, the only one at a time; once it reads,
		// the body is no longer at its start (Rewind).
		r.pull.Lock()
		defer r.pull.Unlock()
		r.mu.Lock()
		retired := rd.gen != r.gen
		r.rewound = r.rewound && retired
		r.mu.Unlock()
		if retired {
			return 0, errRetired
		}
		return r.src.Read(p)
	}
	// At the end of what was kept: read on from the caller's body, one
	// reader at a time, and keep what fits.
	r.pull.Lock()
	defer r.pull.Unlock()
	if n, done, err := rd.fromKept(p); done { // another reader pulled meanwhile
		return n, err
	}
	// While the body is kept, a read takes no more than the room left (at
	// least a byte, to find the end or outgrow it): a read under way when
	// its reader is retired (HTTP/2's writer asks for up to 512 KiB at
	// once) cannot then take the body past the limit for the next one.
	r.mu.Lock()
	if room := r.limit - len(r.kept); r.over == nil && room < len(p) {
		p = p[:max(room, 1)]
	}
	r.mu.Unlock()
	n, err := r.src.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	current := !rd.closed && rd.gen == r.gen && !r.released
	if n > 0 && r.over == nil {
		if !r.released && len(r.kept)+n <= r.limit && (r.budget == nil || r.done || r.budget.take(int64(n))) {
			if r.budget != nil && !r.done {
				r.held += int64(n)
			}
			r.kept = append(r.kept, p[:n]...) // kept even for a reader that is no longer current: the next one needs it
			if current {
				rd.pos += n
			}
		} else if current {
			r.over = rd // the body commits to this reader
		} else {
			r.over = &replayReader{} // lost with a retired reader: no one can send it whole
		}
	}
	if err != nil && r.over == nil {
		r.srcErr = err
	}
	if !current {
		return 0, errRetired
	}
	return n, err
}

// fromKept serves a read from what was kept, or says why it cannot be
// served at all; done is false when the read must go on to the caller's
// body.
func (rd *replayReader) fromKept(p []byte) (n int, done bool, err error) {
	r := rd.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rd.closed:
		return 0, true, http.ErrBodyReadAfterClose
	case rd.gen != r.gen:
		return 0, true, errRetired
	case r.released:
		return 0, true, errNotReplayable
	case r.seeker != nil:
		return 0, false, nil
	case rd.pos < len(r.kept) && r.over != rd:
		n := copy(p, r.kept[rd.pos:])
		rd.pos += n
		return n, true, nil
	case r.srcErr != nil && r.over == nil:
		return 0, true, r.srcErr
	case r.over != nil && r.over != rd:
		return 0, true, errNotReplayable
	}
	return 0, false, nil
}

func (rd *replayReader) Close() error {
	rd.r.mu.Lock()
	closed := rd.closed
	rd.closed = true
	rd.r.mu.Unlock()
	if !closed {
		rd.r.release()
	}
	return nil
}

type sectionReader struct {
	*io.SectionReader
	r    *Replay
	once sync.Once
}

func (s *sectionReader) Close() error {
	s.once.Do(s.r.release)
	return nil
}
