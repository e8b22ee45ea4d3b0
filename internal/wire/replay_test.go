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
