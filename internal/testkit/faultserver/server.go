package faultserver

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
)

// Entry is one request in the server's log.
type Entry struct {
	Seq            int    // 1-based arrival order
	Method         string // request method
	Path           string // URL path, without the query
	Route          string // the route that handled it, e.g. "/fail"; "" for an unknown path
	Key            string // the "key" query parameter
	Cookie         string // the Cookie header
	IdempotencyKey string // the Idempotency-Key header
	Traceparent    string // the W3C traceparent header
	Status         int    // status sent; 0 when the connection was dropped without a response
	BodyBytes      int64  // request body bytes read
	Signals        int    // request headers of the cross-layer protocol (named Retrystack-*)
	BodySum        string // the SHA-256 of the body read, in hex; "" for none
}

// Stats counts one route's requests for one key.
type Stats struct {
	Requests  int // requests received
	Processed int // writes performed: POSTs on /orders, /write and /abort
}

// Server is the HTTP/1.1 fault server. Its methods are safe for concurrent
// use.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	port string

	closing  chan struct{} // closed by Close: every wait ends
	serveErr chan error

	mu       sync.Mutex
	closed   bool
	log      []Entry
	stats    map[routeKey]Stats
	state    map[string]int      // per-path-and-key progress of /fail and /login
	written  map[string]struct{} // Idempotency-Keys /write has processed, per key
	open     int                 // connections open
	accepted int                 // connections accepted, ever
	states   map[net.Conn]http.ConnState
	busy     int            // connections new or active, plus handlers running
	changed  chan struct{}  // closed and replaced whenever busy drops
	handlers sync.WaitGroup // handlers running
	conns    sync.WaitGroup // connections not yet closed or hijacked
}

type routeKey struct{ route, key string }

// New starts a fault server on 127.0.0.1:0.
func New() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		ln:       ln,
		port:     strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
		closing:  make(chan struct{}),
		serveErr: make(chan error, 1),
		stats:    map[routeKey]Stats{},
		state:    map[string]int{},
		written:  map[string]struct{}{},
		states:   map[net.Conn]http.ConnState{},
		changed:  make(chan struct{}),
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	s.srv = &http.Server{
		Handler:   http.HandlerFunc(s.serve),
		Protocols: &protocols,
		ConnState: s.connState,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return "http://127.0.0.1:" + s.port }

// LocalhostURL is the same server under another origin,
// "http://localhost:PORT", for cross-origin and host-scope tests.
func (s *Server) LocalhostURL() string { return "http://localhost:" + s.port }

// Log returns a copy of the request log in arrival order. Requests still
// being handled have Status 0.
func (s *Server) Log() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.log...)
}

// Stats returns the counters of one route ("/orders", "/fail", ...) and key.
func (s *Server) Stats(route, key string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats[routeKey{route, key}]
}

// OpenConns is the number of client connections the server holds open.
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// Accepted is the number of client connections the server has accepted
// since it started: a client that throws its pool away shows here.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Close stops the server, closes every connection, ends every pending wait
// and returns once every handler has returned. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	close(s.closing)
	err := s.srv.Close()
	if serveErr := <-s.serveErr; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	// Serve has returned, so no connection starts after this point.
	s.handlers.Wait()
	s.conns.Wait()
	return err
}

func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew:
		s.open++
		s.accepted++
		s.conns.Add(1)
	case http.StateHijacked, http.StateClosed:
		s.open--
		s.conns.Done()
	}
	working := func(st http.ConnState) bool { return st == http.StateNew || st == http.StateActive }
	prev, seen := s.states[c]
	was, now := seen && working(prev), working(state)
	if state == http.StateHijacked || state == http.StateClosed {
		delete(s.states, c)
	} else {
		s.states[c] = state
	}
	switch {
	case now && !was:
		s.busy++
	case was && !now:
		s.busyDone()
	}
}

// busyDone lowers busy and wakes WaitIdle; s.mu is held.
func (s *Server) busyDone() {
	s.busy--
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitIdle waits until no request is being read or handled: every
// connection is idle or closed and every handler has returned. A client
// that gave up on a request may leave the server still reading it; tests
// call WaitIdle before they count. It returns ctx's error if ctx ends
// first, for instance while a client holds a connection it never uses.
func (s *Server) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		busy, changed := s.busy, s.changed
		s.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// serve logs the request, reads its body and hands it to its route.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rt, args := match(r.URL.Path)
	key := r.URL.Query().Get("key")

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.busy++
	defer func() {
		s.mu.Lock()
		s.busyDone()
		s.mu.Unlock()
		s.handlers.Done()
	}()
	seq := len(s.log) + 1
	s.log = append(s.log, Entry{
		Seq:            seq,
		Method:         r.Method,
		Path:           r.URL.Path,
		Route:          rt.name,
		Key:            key,
		Cookie:         r.Header.Get("Cookie"),
		IdempotencyKey: r.Header.Get(protocol.IdempotencyKey),
		Traceparent:    r.Header.Get("Traceparent"),
		Signals:        signals(r.Header),
	})
	st := s.stats[routeKey{rt.name, key}]
	st.Requests++
	s.stats[routeKey{rt.name, key}] = st
	s.mu.Unlock()

	rw := &recorder{ResponseWriter: w, s: s, seq: seq}
	req := &request{Request: r, key: key, args: args, w: rw, s: s, seq: seq}
	if !rt.readsBody {
		req.readBody(r.Body)
	}
	if rt.handle == nil {
		http.NotFound(rw, r)
	} else if err := rt.handle(req); err != nil && rw.status == 0 {
		http.Error(rw, "faultserver: "+err.Error(), http.StatusBadRequest)
	}
}

// wait blocks for d, or until the client goes away or the server closes.
// It reports whether the whole duration passed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// recorder logs the status a handler sends before the client can see it;
// 0 means none.
type recorder struct {
	http.ResponseWriter
	s      *Server
	seq    int
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.s.mu.Lock()
		r.s.log[r.seq-1].Status = code
		r.s.mu.Unlock()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// signals counts h's headers of the cross-layer protocol, by their default
// prefix.
func signals(h http.Header) int {
	n := 0
	for k := range h {
		if strings.HasPrefix(k, "Retrystack-") {
			n++
		}
	}
	return n
}
