package wire

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
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
	conns  atomic.Int32
	hedges atomic.Int32 // hedges a hedging layer below sent, each on a connection of its own
	wrote  atomic.Bool

	mu   sync.Mutex
	peer net.Addr

	client   httptrace.ClientTrace
	composed bool // WithClientTrace changed client: not pooled again
}

var traces = sync.Pool{New: func() any {
	t := new(Trace)
	t.client = httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			t.conns.Add(1)
			if info.Conn != nil {
				t.mu.Lock()
				t.peer = info.Conn.RemoteAddr()
				t.mu.Unlock()
			}
		},
		WroteHeaders: func() { t.wrote.Store(true) },
	}
	return t
}}

// GetTrace returns a reset trace from the pool.
func GetTrace() *Trace {
	t := traces.Get().(*Trace)
	t.Reset()
	return t
}

// PutTrace gives t back once its operation's RoundTrip has returned.
func PutTrace(t *Trace) {
	if !t.composed {
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
	t.composed = httptrace.ContextClientTrace(ctx) != nil
	return httptrace.WithClientTrace(ctx, &t.client)
}

// Reset starts an attempt.
func (t *Trace) Reset() {
	t.conns.Store(0)
	t.hedges.Store(0)
	t.wrote.Store(false)
	t.mu.Lock()
	t.peer = nil
	t.mu.Unlock()
}

// Conns counts the connections handed out in the attempt.
func (t *Trace) Conns() int { return int(t.conns.Load()) }

// Wrote reports whether the attempt's request headers were written.
func (t *Trace) Wrote() bool { return t.wrote.Load() }

// Peer is the last connection's remote address, or nil.
func (t *Trace) Peer() net.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peer
}

// Hedged counts one more hedge of the attempt.
func (t *Trace) Hedged() { t.hedges.Add(1) }

// Hedges counts the attempt's hedges.
func (t *Trace) Hedges() int { return int(t.hedges.Load()) }

// Transparent counts the sends beyond the first of the attempt that the
// transport made on its own: hedges are not.
func (t *Trace) Transparent() int { return max(t.Conns()-t.Hedges()-1, 0) }
