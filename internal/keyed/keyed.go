// Package keyed is the per-key state the layers keep for each host or
// key they have seen (pacing's holds, the concurrency limit's keys, the
// circuit breaker's circuits, the throttle's hosts): one bounded map,
// read without a lock, with one way of forgetting.
package keyed

import (
	"sync"
	"sync/atomic"
)

// Map holds a V for each key, at most Max of them as long as Forget lets
// it forget some. A key that would pass the bound first makes room for a
// tenth of it at once, so that the scan is paid once per Max/10 new keys:
// the values Forget lets go when asked gently, then, if that was not
// enough, those it lets go when forced; in the map's random order. Set
// Max and Forget before the first use; the zero Map is otherwise ready.
// It is safe for concurrent use.
type Map[V any] struct {
	// Max bounds the keys; at least 1.
	Max int
	// Forget reports whether v may be forgotten now: force is false on
	// the first pass (what is idle), true on the second. It runs with the
	// map's writers held off, and may mark v forgotten (a request that
	// loaded v before can then find its successor). nil: any value may go.
	Forget func(v V, force bool) bool

	mu sync.Mutex // writers
	m  sync.Map   // string → V
	n  atomic.Int64
}

// Load returns key's value, without a lock.
func (m *Map[V]) Load(key string) (v V, ok bool) {
	x, ok := m.m.Load(key)
	if ok {
		v = x.(V)
	}
	return v, ok
}

// LoadOrMake returns key's value, made with mk (and room made for it)
// if the key is new.
func (m *Map[V]) LoadOrMake(key string, mk func() V) V {
	if v, ok := m.Load(key); ok {
		return v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.Load(key); ok {
		return v
	}
	v := mk()
	m.addLocked(key, v)
	return v
}

// Update replaces key's value by what f makes of it (ok: the key has
// one), or forgets the key when f says not to keep it; writers wait
// meanwhile.
func (m *Map[V]) Update(key string, f func(old V, ok bool) (v V, keep bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.Load(key)
	v, keep := f(old, ok)
	switch {
	case keep && ok:
		m.m.Store(key, v)
	case keep:
		m.addLocked(key, v)
	case ok:
		m.m.Delete(key)
		m.n.Add(-1)
	}
}

// Sweep forgets every value forget says may go.
func (m *Map[V]) Sweep(forget func(V) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m.Range(func(k, x any) bool {
		if forget(x.(V)) {
			m.m.Delete(k)
			m.n.Add(-1)
		}
		return true
	})
}

// Range calls f for each key and value, without a lock (a value added or
// forgotten meanwhile may or may not be seen), until f returns false.
func (m *Map[V]) Range(f func(key string, v V) bool) {
	m.m.Range(func(k, x any) bool { return f(k.(string), x.(V)) })
}

// Len is how many keys the map holds: a reader that finds it 0 need look
// nothing up.
func (m *Map[V]) Len() int { return int(m.n.Load()) }

// addLocked adds a new key, making room for it first.
func (m *Map[V]) addLocked(key string, v V) {
	if int(m.n.Load()) >= m.Max {
		target := int64(m.Max - max(m.Max/10, 1))
		for _, force := range [2]bool{false, true} {
			m.m.Range(func(k, x any) bool {
				if m.n.Load() <= target {
					return false
				}
				if m.Forget == nil || m.Forget(x.(V), force) {
					m.m.Delete(k)
					m.n.Add(-1)
				}
				return true
			})
		}
	}
	m.m.Store(key, v)
	m.n.Add(1)
}
