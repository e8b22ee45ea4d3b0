package wire

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Trace watches an operation's sends on the wire, one attempt at a time
// (Reset before each): the connections the transport hands out, one per
// physical send its own resends included; whether the request's headers
// were written; the last connection's peer. It is the module's one wire
// trace: the retry layer's, and the attempt telemetry's when no retry
// layer watches. The transport calls it from its own goroutines, hence
// the atomics.
//
// Traces come from a pool (GetTrace, PutTrace) with their callbacks bound
// once, so an operation makes no closures. A trace never reaches the
// caller. The transport calls GotConn within RoundTrip; only WroteHeaders
// may come after it returns (net/http reports the write from a goroutine
// of its own), and a late one can only mark a later attempt "written":
// the safe side, since a written request is never resent unless it may
// be. (HTTP/2 does not always report WroteHeaders for a stream refused at
// once, so that cannot count sends; a connection found dead before
// anything was written counts too, so a count may include a send no
// server saw.)
type Trace struct {
	// state packs what an attempt saw, so that a reset is one store:
	// the connections handed out (low 32 bits), the hedges (bits 32-47),
	// whether the headers were written (bit 48), whether peer is set
	// (bit 49) and the redirect hops (bits 50-63).
	state atomic.Uint64

	mu   sync.Mutex
	peer net.Addr

	injected atomic.Pointer[string] // the faults a chaos layer injected into the attempt, by kind; nil: none
	held     atomic.Int64           // how long layers below held the attempt before sending it, in ns
	nested   atomic.Int32           // sends a stack inside made beyond its first (NestedSend)

	client   httptrace.ClientTrace
	composed atomic.Bool // WithClientTrace changed client, or a composed copy reaches it: not pooled again
}

const (
	connOne  = 1
	hedgeOne = 1 << 32
	wroteBit = 1 << 48
	peerBit  = 1 << 49
	hopOne   = 1 << 50
)

var traces = sync.Pool{New: func() any {
	t := new(Trace)
	t.client = httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Conn != nil {
				t.mu.Lock()
				t.peer = info.Conn.RemoteAddr()
				t.mu.Unlock()
				t.state.Add(connOne)
				t.setBit(peerBit)
				return
			}
			t.state.Add(connOne)
		},
		WroteHeaders: func() { t.setBit(wroteBit) },
	}
	return t
}}

func (t *Trace) setBit(b uint64) {
	for {
		s := t.state.Load()
		if s&b != 0 || t.state.CompareAndSwap(s, s|b) {
			return
		}
	}
}

// Unpooled marks t as never to go back to the pool: a context that may
// outlive the operation (resp.Request's) reaches it through a composed
// trace.
func (t *Trace) Unpooled() { t.composed.Store(true) }

// GetTrace returns a reset trace from the pool.
func GetTrace() *Trace { return traces.Get().(*Trace) }

// PutTrace gives t back, reset, once its operation's RoundTrip has
// returned.
func PutTrace(t *Trace) {
	if !t.composed.Load() {
		t.Reset()
		traces.Put(t)
	}
}

// Client is the trace's callbacks. httptrace.WithClientTrace changes the
// ClientTrace it is given (it composes the caller's into it): give it a
// copy, or use With.
func (t *Trace) Client() *httptrace.ClientTrace { return &t.client }

// With returns ctx with t's callbacks, composed with any trace ctx has
// already (httptrace.WithClientTrace); t then never goes back to the
// pool, since the composition changed its callbacks.
func (t *Trace) With(ctx context.Context) context.Context {
	if httptrace.ContextClientTrace(ctx) != nil {
		t.composed.Store(true)
	}
	return httptrace.WithClientTrace(ctx, &t.client)
}

// Reset starts an attempt.
func (t *Trace) Reset() {
	if t.state.Swap(0)&peerBit != 0 {
		t.mu.Lock()
		t.peer = nil
		t.mu.Unlock()
	}
	if t.injected.Load() != nil {
		t.injected.Store(nil)
	}
	if t.held.Load() != 0 {
		t.held.Store(0)
	}
	if t.nested.Load() != 0 {
		t.nested.Store(0)
	}
}

// NestedSend counts a send that a stack used inside this attempt's (as
// its transport, say) made beyond its own first: that stack's retry or
// hop, counted by it, not a resend of the transport's own here.
func (t *Trace) NestedSend() { t.nested.Add(1) }

// Hold records that a layer below held the attempt for d before sending
// it.
func (t *Trace) Hold(d time.Duration) { t.held.Add(int64(d)) }

// Held is how long layers below held the attempt before sending it.
func (t *Trace) Held() time.Duration { return time.Duration(t.held.Load()) }

// Inject records that a chaos layer injected a fault of kind into the
// attempt.
func (t *Trace) Inject(kind string) {
	for {
		old := t.injected.Load()
		s := kind
		if old != nil {
			s = *old + " " + kind
		}
		if t.injected.CompareAndSwap(old, &s) {
			return
		}
	}
}

// Injected is the faults injected into the attempt, by kind,
// space-separated; "" when none.
func (t *Trace) Injected() string {
	if p := t.injected.Load(); p != nil {
		return *p
	}
	return ""
}

// Conns counts the connections handed out in the attempt.
func (t *Trace) Conns() int { return int(uint32(t.state.Load())) }

// Wrote reports whether the attempt's request headers were written.
func (t *Trace) Wrote() bool { return t.state.Load()&wroteBit != 0 }

// Peer is the last connection's remote address, or nil.
func (t *Trace) Peer() net.Addr {
	if t.state.Load()&peerBit == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peer
}

// Hedged counts one more hedge of the attempt.
func (t *Trace) Hedged() { t.state.Add(hedgeOne) }

// Hedges counts the attempt's hedges.
func (t *Trace) Hedges() int { return int(uint16(t.state.Load() >> 32)) }

// Hopped counts one more redirect hop of the attempt: a redirect layer
// below the retry layer sends it.
func (t *Trace) Hopped() { t.state.Add(hopOne) }

// Hops counts the attempt's redirect hops.
func (t *Trace) Hops() int { return int(t.state.Load() >> 50) }

// Transparent counts the sends beyond the first of the attempt that the
// transport made on its own: hedges and redirect hops are not.
func (t *Trace) Transparent() int {
	return max(t.Conns()-t.Hedges()-t.Hops()-int(t.nested.Load())-1, 0)
}
