package keyed

import (
	"fmt"
	"sync"
	"testing"
)

// Past Max the map forgets a tenth of the bound at once: the idle values
// first; values Forget never lets go are kept, and the map then grows past
// Max rather than lose them.
func TestBound(t *testing.T) {
	type val struct{ busy, forgotten bool }
	m := Map[*val]{Max: 100, Forget: func(v *val, force bool) bool {
		if v.busy {
			return false
		}
		v.forgotten = true
		return true
	}}
	busy := m.LoadOrMake("busy", func() *val { return &val{busy: true} })
	var first *val
	for i := range 100 {
		v := m.LoadOrMake(fmt.Sprint(i), func() *val { return new(val) })
		if i == 0 {
			first = v
		}
	}
	if n := m.Len(); n > 100 || n < 90 {
		t.Fatalf("%d keys, want at most 100 and most of them", n)
	}
	if v, ok := m.Load("busy"); !ok || v != busy {
		t.Fatal("a value Forget keeps was forgotten")
	}
	if v, ok := m.Load("0"); ok && v != first || !ok && !first.forgotten {
		t.Fatal("a forgotten value was not marked")
	}

	all := Map[*val]{Max: 10, Forget: func(*val, bool) bool { return false }}
	for i := range 20 {
		all.LoadOrMake(fmt.Sprint(i), func() *val { return new(val) })
	}
	if all.Len() != 20 {
		t.Fatalf("%d keys, want all 20 kept: none may go", all.Len())
	}
}

// The second pass forgets what the first kept, when forced.
func TestForced(t *testing.T) {
	var forced int
	m := Map[int]{Max: 10, Forget: func(_ int, force bool) bool {
		if force {
			forced++
		}
		return force
	}}
	for i := range 11 {
		m.Update(fmt.Sprint(i), func(int, bool) (int, bool) { return i, true })
	}
	if m.Len() != 10 || forced != 1 {
		t.Fatalf("%d keys after %d forced, want 10 (9 + the new one) after 1", m.Len(), forced)
	}
}

// Update keeps, replaces and forgets; Sweep forgets what it is told.
func TestUpdateAndSweep(t *testing.T) {
	var m Map[int]
	m.Max = 10
	longer := func(v int) func(int, bool) (int, bool) {
		return func(old int, ok bool) (int, bool) { return max(old, v), true }
	}
	m.Update("a", longer(5))
	m.Update("a", longer(3))
	if v, _ := m.Load("a"); v != 5 || m.Len() != 1 {
		t.Fatalf("a = %d, %d keys; want 5, 1", v, m.Len())
	}
	m.Update("a", func(int, bool) (int, bool) { return 0, false })
	m.Update("b", func(int, bool) (int, bool) { return 0, false }) // absent, not kept: nothing
	if _, ok := m.Load("a"); ok || m.Len() != 0 {
		t.Fatalf("a still held, %d keys", m.Len())
	}
	for i := range 6 {
		m.Update(fmt.Sprint(i), longer(i))
	}
	m.Sweep(func(v int) bool { return v%2 == 0 })
	if m.Len() != 3 {
		t.Fatalf("%d keys after the sweep, want the 3 odd ones", m.Len())
	}
}

// Readers, makers and the making of room run at once (go test -race).
func TestConcurrent(t *testing.T) {
	m := Map[*int]{Max: 50}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint((g*1000 + i) % 200)
				m.LoadOrMake(k, func() *int { return new(int) })
				m.Load(k)
			}
		})
	}
	wg.Wait()
	if n := m.Len(); n > 50 {
		t.Fatalf("%d keys, bound 50", n)
	}
}
