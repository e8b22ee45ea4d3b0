package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// closeCount is a body that counts its Close calls, and hides every
// interface but Read and Close (a stream: what an SDK sends).
type closeCount struct {
	r      io.Reader
	closed atomic.Int32
}

func (c *closeCount) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *closeCount) Close() error               { c.closed.Add(1); return nil }

func readAll(t *testing.T, r *Replay) string {
	t.Helper()
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReplayKeptBody(t *testing.T) {
	body := &closeCount{r: strings.NewReader(strings.Repeat("x", 1000))}
	budget := NewReplayBudget(1 << 20)
	r := NewReplay(body, 4096, budget)
	if !r.Concurrent() || !r.Replayable() {
		t.Fatal("a stream under the limit is replayable by concurrent readers")
	}
	first := readAll(t, r)
	r.Retire()
	if again := readAll(t, r); again != first || len(first) != 1000 {
		t.Fatalf("replayed %d bytes, first %d; want 1000 twice", len(again), len(first))
	}
	if budget.left.Load() != 1<<20-1000 {
		t.Errorf("budget %d taken, want 1000", 1<<20-budget.left.Load())
	}
	if body.closed.Load() != 0 {
		t.Fatal("the caller's body closed before the operation is done")
	}
	r.Done()
	if body.closed.Load() != 1 || budget.left.Load() != 1<<20 {
		t.Errorf("after Done: closed %d times, budget %d; want 1, all of it back", body.closed.Load(), budget.left.Load())
	}
}

// A body that outgrows the limit is read through once, by the reader that
// went past it, and cannot be replayed; the budget gets back what it lent.
func TestReplayOutgrown(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	body := &closeCount{r: bytes.NewReader(data)}
	budget := NewReplayBudget(1 << 20)
	r := NewReplay(body, 4096, budget)
	if got := readAll(t, r); got != string(data) {
		t.Fatalf("the first reader got %d bytes, want all %d", len(got), len(data))
	}
	if r.Replayable() {
		t.Fatal("replayable after outgrowing the limit")
	}
	if _, err := r.Reader(); !errors.Is(err, errNotReplayable) {
		t.Fatalf("Reader: %v, want errNotReplayable", err)
	}
	r.Done()
	if body.closed.Load() != 1 || budget.left.Load() != 1<<20 {
		t.Errorf("closed %d times, budget %d; want 1, all of it back", body.closed.Load(), budget.left.Load())
	}
}

// The client's budget caps what every operation keeps at once.
func TestReplayBudget(t *testing.T) {
	budget := NewReplayBudget(1500)
	a := NewReplay(&closeCount{r: strings.NewReader(strings.Repeat("a", 1000))}, 4096, budget)
	b := NewReplay(&closeCount{r: strings.NewReader(strings.Repeat("b", 1000))}, 4096, budget)
	readAll(t, a)
	readAll(t, b)
	if !a.Replayable() || b.Replayable() {
		t.Fatalf("replayable: %v, %v; want the first only (the budget holds 1500 of 2000)", a.Replayable(), b.Replayable())
	}
	a.Done()
	b.Done()
	if budget.left.Load() != 1500 {
		t.Errorf("budget %d after both are done, want 1500", budget.left.Load())
	}
}

// A retired reader (the writer of an attempt that failed, still reading)
// neither reads on nor takes the body past its limit from the next one.
func TestReplayRetire(t *testing.T) {
	r := NewReplay(&closeCount{r: strings.NewReader("hello world")}, 4096, nil)
	old, _ := r.Reader()
	buf := make([]byte, 5)
	io.ReadFull(old, buf)
	r.Retire()
	if _, err := old.Read(buf); !errors.Is(err, errRetired) {
		t.Fatalf("a retired reader read on: %v", err)
	}
	if got := readAll(t, r); got != "hello world" {
		t.Fatalf("replay %q", got)
	}
	old.Close()
	r.Done()
}

// Concurrent readers (hedges) of a kept body each get all of it.
func TestReplayConcurrentReaders(t *testing.T) {
	data := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	body := &closeCount{r: strings.NewReader(data)}
	r := NewReplay(body, 1<<20, nil)
	var wg sync.WaitGroup
	for range 4 {
		rd, err := r.Reader()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer rd.Close()
			b, err := io.ReadAll(rd)
			if err != nil || string(b) != data {
				t.Errorf("a reader got %d bytes, %v", len(b), err)
			}
		})
	}
	wg.Wait()
	r.Done()
	if body.closed.Load() != 1 {
		t.Errorf("closed %d times, want 1", body.closed.Load())
	}
}

// An *os.File is read again by sections from where it started, at once by
// several readers, and closed once every reader and the operation are
// done.
func TestReplayFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("skip:the file's content"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Seek(5, io.SeekStart)
	r := NewReplay(f, 4, nil) // a limit far below the file: a file keeps nothing
	if !r.Concurrent() {
		t.Fatal("a file is read by sections")
	}
	for range 3 {
		if got := readAll(t, r); got != "the file's content" {
			t.Fatalf("read %q", got)
		}
	}
	r.Done()
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the file is not closed after Done: %v", err)
	}
}

// seekOnly can Seek but not ReadAt; its Seek fails once broken.
type seekOnly struct {
	*strings.Reader
	broken bool
}

func (s *seekOnly) Seek(off int64, whence int) (int64, error) {
	if s.broken {
		return 0, errors.New("seek failed")
	}
	return s.Reader.Seek(off, whence)
}
func (s *seekOnly) ReadAt()      {} // shadows strings.Reader's: not an io.ReaderAt
func (s *seekOnly) Close() error { return nil }

func TestReplaySeekOnly(t *testing.T) {
	s := &seekOnly{Reader: strings.NewReader("rewind me")}
	r := NewReplay(s, 4096, nil)
	if r.Concurrent() {
		t.Fatal("a body that can only Seek is rewound for one reader at a time")
	}
	if got := readAll(t, r); got != "rewind me" {
		t.Fatalf("read %q", got)
	}
	r.Retire()
	if got := readAll(t, r); got != "rewind me" {
		t.Fatalf("rewound: %q", got)
	}
	s.broken = true
	r.Retire()
	if _, err := r.Reader(); err == nil || r.Replayable() {
		t.Fatal("a body whose Seek fails is replayed")
	}
	r.Done()

	// A Seek that fails at the start: not replayable, and the body left
	// to the transport.
	if NewReplay(&seekOnly{Reader: strings.NewReader("x"), broken: true}, 4096, nil).Replayable() {
		t.Fatal("replayable although Seek failed at once")
	}
}

// stall is a caller's body whose Read blocks until it is closed, and says
// when a Read is blocked in it.
type stall struct {
	entered, closed chan struct{}
	once            sync.Once
}

func (s *stall) Read([]byte) (int, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.closed
	return 0, io.ErrClosedPipe
}

func (s *stall) Close() error { s.once.Do(func() { close(s.closed) }); return nil }

// A reader blocked on a stalled body blocks neither Close (HTTP/2 aborts a
// send by closing its body during the Read), nor Retire, nor Replayable;
// the operation's end closes the caller's body, which ends the Read.
// (Found by review: the lock was held across the Read.)
func TestReplayStalledBodyBlocksNothing(t *testing.T) {
	s := &stall{entered: make(chan struct{}, 1), closed: make(chan struct{})}
	r := NewReplay(s, 1<<10, nil)
	rd, _ := r.Reader()
	readErr := make(chan error, 1)
	go func() {
		_, err := rd.Read(make([]byte, 8))
		readErr <- err
	}()
	<-s.entered // the Read is blocked in the caller's body
	rd.Close()
	r.Retire()
	r.Replayable()
	r.Done() // the last hold: closes the caller's body
	if err := <-readErr; err == nil {
		t.Error("the blocked Read ended without an error")
	}
}

// After the operation and its readers are done, GetBody (a caller's, on
// resp.Request) gets an error, not an empty body; the caller's body is
// closed once; the budget is whole. (Found by review.)
func TestReplayReaderAfterDone(t *testing.T) {
	body := &closeCount{r: strings.NewReader("payload")}
	b := NewReplayBudget(100)
	r := NewReplay(body, 1<<10, b)
	readAll(t, r)
	r.Done()
	if _, err := r.GetBody(); err == nil {
		t.Error("GetBody after the operation was done gave a reader")
	}
	if body.closed.Load() != 1 || b.left.Load() != 100 {
		t.Errorf("closed %d times, budget %d; want 1, 100", body.closed.Load(), b.left.Load())
	}
}

// GetBody racing the last release neither races nor reads a pooled
// buffer. (Found by review.)
func TestReplayGetBodyRacesRelease(t *testing.T) {
	for range 200 {
		r := NewReplay(&closeCount{r: strings.NewReader("payload")}, 1<<10, NewReplayBudget(1<<10))
		readAll(t, r)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if rd, err := r.GetBody(); err == nil {
				if b, _ := io.ReadAll(rd); len(b) > 0 && string(b) != "payload" {
					t.Errorf("read %q", b)
				}
				rd.Close()
			}
		}()
		r.Done()
		<-done
	}
}

// halfSeeker's Seek back to the start fails after a Seek to the end.
type halfSeeker struct {
	*strings.Reader
	atEnd bool
}

func (h *halfSeeker) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart && h.atEnd {
		return 0, errors.New("seek failed")
	}
	h.atEnd = h.atEnd || whence == io.SeekEnd
	return h.Reader.Seek(off, whence)
}
func (h *halfSeeker) Close() error { return nil }

// A Seek back that fails while measuring the body leaves it at its end:
// not replayable, never an empty first send. (Found by review.)
func TestReplaySeekFailsMidway(t *testing.T) {
	if NewReplay(&halfSeeker{Reader: strings.NewReader("payload")}, 1<<10, nil).Replayable() {
		t.Error("replayable though it was left at its end")
	}
}

// A transport that never closes the readers it was given does not keep the
// kept bytes from the client's budget after the operation. (Found by
// review.)
func TestReplayBudgetBackAtDone(t *testing.T) {
	b := NewReplayBudget(1 << 10)
	for range 3 {
		r := NewReplay(io.NopCloser(strings.NewReader(strings.Repeat("x", 400))), 1<<10, b)
		rd, _ := r.Reader()
		io.ReadAll(rd) // never closed
		r.Done()
	}
	if left := b.left.Load(); left != 1<<10 {
		t.Errorf("budget left %d of %d", left, 1<<10)
	}
}

// A trace a kept context may still reach (a composed copy in
// resp.Request's context) never goes back to the pool, so no later
// operation's counts can move when the kept context is used.
func TestUnpooledTraceIsNotReused(t *testing.T) {
	tr := GetTrace()
	tr.Unpooled()
	PutTrace(tr)
	for range 100 {
		if GetTrace() == tr {
			t.Fatal("an unpooled trace came back from the pool")
		}
	}
}

// seekStall is a stall that can Seek.
type seekStall struct{ stall }

func (*seekStall) Seek(int64, int) (int64, error) { return 0, nil }

// Rewind, which the retry loop calls before it plans a retry, does not
// wait for a retired reader blocked in a Read of a body that can only
// Seek: the next Reader rewinds it instead.
func TestRewindDoesNotWaitForABlockedRead(t *testing.T) {
	s := &seekStall{stall{entered: make(chan struct{}, 1), closed: make(chan struct{})}}
	r := NewReplay(s, 1<<10, nil)
	rd, _ := r.Reader()
	readErr := make(chan error, 1)
	go func() {
		_, err := rd.Read(make([]byte, 8))
		readErr <- err
	}()
	<-s.entered
	if err := r.Rewind(); err != nil {
		t.Errorf("Rewind: %v", err)
	}
	rd.Close()
	r.Done()
	if err := <-readErr; err == nil {
		t.Error("the blocked Read ended without an error")
	}
}

// A rewind that fails names the Seek, from Rewind, Err and Reader alike.
func TestRewindThatFailsNamesTheSeek(t *testing.T) {
	s := &seekOnly{Reader: strings.NewReader("rewind me")}
	r := NewReplay(s, 4096, nil)
	readAll(t, r)
	s.broken = true
	err := r.Rewind()
	if err == nil || !strings.Contains(err.Error(), "seek failed") || !strings.Contains(err.Error(), "rewinding") {
		t.Fatalf("Rewind: %v, want the Seek's failure named", err)
	}
	if _, rerr := r.Reader(); rerr != err || r.Err() != err {
		t.Errorf("Reader %v, Err %v; want %v", rerr, r.Err(), err)
	}
	r.Done()
}

// While a body is kept, one read takes no more than the room left: a
// reader retired with a read under way (HTTP/2's writer asks for up to
// 512 KiB at once) leaves the body replayable; then a read of a full
// buffer takes a single byte, and outgrows it.
func TestReplayReadTakesTheRoomLeft(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	r := NewReplay(io.NopCloser(bytes.NewReader(data)), 4096, nil)
	defer r.Done()
	rd, err := r.Reader()
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 3000)
	if n, err := io.ReadFull(rd, p); n != 3000 || err != nil {
		t.Fatalf("first read: %d, %v", n, err)
	}
	big := make([]byte, 512<<10)
	if n, err := rd.Read(big); n != 1096 || err != nil {
		t.Fatalf("a 512 KiB read with 1096 bytes of room: %d, %v; want 1096", n, err)
	}
	if !r.Replayable() {
		t.Fatal("a read that fit the room outgrew the buffer")
	}
	if n, err := rd.Read(big); n != 1 || err != nil || r.Replayable() {
		t.Fatalf("a read of a full buffer: %d, %v, replayable %v; want 1 byte, the buffer outgrown", n, err, r.Replayable())
	}
	if n, _ := rd.Read(big); n <= 1 {
		t.Fatalf("the reader the body committed to reads on in whole reads: %d bytes", n)
	}
	rd.Close()
}
