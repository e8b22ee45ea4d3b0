package faultserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Fault is what the h2c server does with one stream.
// The zero value is H2Serve.
type H2Fault int

const (
	// H2Serve answers the stream normally once the request is complete.
	H2Serve H2Fault = iota
	// H2Refuse sends RST_STREAM(REFUSED_STREAM) as soon as the HEADERS
	// arrive, before any body: the request was not processed (RFC 9113 §8.7),
	// so a client may retry it.
	H2Refuse
	// H2GoAway sends GOAWAY(NO_ERROR) with a last-stream-id below this
	// stream as soon as the HEADERS arrive, then closes the connection: the
	// request was not processed.
	H2GoAway
	// H2GoAwayProcessed reads the whole request, then sends GOAWAY(NO_ERROR)
	// with last-stream-id equal to this stream and closes the connection
	// without a response: the request may have been processed.
	H2GoAwayProcessed
	// H2ResetProtocolError reads the whole request, then sends
	// RST_STREAM(PROTOCOL_ERROR).
	H2ResetProtocolError
	// H2ResetInternalError reads the whole request, then sends
	// RST_STREAM(INTERNAL_ERROR): what a reverse proxy sends when its
	// upstream fails. The request may have been processed.
	H2ResetInternalError
	// H2RefuseAfterBody sends RST_STREAM(REFUSED_STREAM) when the request's
	// first DATA frame arrives (at once if it has no body): not processed,
	// as with H2Refuse, but the client has begun to read the body by then,
	// so only a body it can make again (GetBody) is resent. With H2Refuse
	// that depends on whether the client's writer read the body before it
	// saw the refusal: net/http resends a body it has not begun to read.
	H2RefuseAfterBody
)

// String returns the fault's short name, e.g. "refuse"; values outside the
// defined constants are formatted as "H2Fault(N)".
func (f H2Fault) String() string {
	switch f {
	case H2Serve:
		return "serve"
	case H2Refuse:
		return "refuse"
	case H2GoAway:
		return "goaway"
	case H2GoAwayProcessed:
		return "goaway-processed"
	case H2ResetProtocolError:
		return "reset-protocol-error"
	case H2ResetInternalError:
		return "reset-internal-error"
	case H2RefuseAfterBody:
		return "refuse-after-body"
	}
	return "H2Fault(" + strconv.Itoa(int(f)) + ")"
}

// H2Config scripts the server. The zero value serves every stream.
// NewH2 copies it, so changing it afterwards has no effect.
type H2Config struct {
	// Faults[i] applies to the i-th stream the server receives (0-based,
	// counted across all connections in arrival order); streams past the end
	// are served. Values outside the defined constants are treated as H2Serve.
	Faults []H2Fault
}

// H2Stream is one entry of the server's stream log. It is a plain value;
// its zero value means nothing.
type H2Stream struct {
	Seq       int     // 1-based arrival order across connections
	Conn      int     // 1-based connection number
	ID        uint32  // HTTP/2 stream id
	Method    string  // :method as received
	Path      string  // :path as received, query included
	BodyBytes int64   // request body bytes (DATA payload) received before the server acted
	Fault     H2Fault // what the server did
	Status    int     // status sent, 0 if none
}

// H2Server is a deliberately misbehaving prior-knowledge HTTP/2 cleartext
// (h2c) origin, scripted by an H2Config. Create one with NewH2; the zero
// value does not serve (URL returns "", Close returns nil). All methods are
// safe for concurrent use. It never logs.
type H2Server struct {
	faults []H2Fault
	ln     net.Listener
	wg     sync.WaitGroup // accept loop and connection goroutines

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // live connections, closed by Close
	nconns int                   // connections accepted so far
	log    []H2Stream
}

// NewH2 listens on 127.0.0.1:0 and serves in the background until Close.
func NewH2(cfg H2Config) (*H2Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &H2Server{
		faults: append([]H2Fault(nil), cfg.Faults...),
		ln:     ln,
		conns:  make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// URL returns "http://127.0.0.1:PORT", or "" for the zero value.
func (s *H2Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Streams returns how many streams (HEADERS) the server has received so far.
func (s *H2Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// Conns returns how many connections the server has accepted so far,
// including ones that never sent a request (HTTP clients sometimes dial
// spares and drop them unused).
func (s *H2Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nconns
}

// Log returns a copy of the stream log, in arrival order. Entries of streams
// still in progress reflect their state at the time of the call.
func (s *H2Server) Log() []H2Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]H2Stream(nil), s.log...)
}

// Close closes the listener and every connection, and waits until every
// goroutine the server started has returned. It is idempotent: later calls
// wait the same way and return nil.
func (s *H2Server) Close() error {
	s.mu.Lock()
	if s.closed || s.ln == nil {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *H2Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // listener closed (or broken): nothing left to serve
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.nconns++
		n := s.nconns
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, n)
	}
}

// h2stream is the per-connection state of an open stream.
type h2stream struct {
	idx   int // index into s.log
	fault H2Fault
}

// h2conn is one connection; only its goroutine touches it.
type h2conn struct {
	s       *H2Server
	c       net.Conn
	num     int
	fr      *http2.Framer
	hbuf    bytes.Buffer
	henc    *hpack.Encoder
	lastID  uint32               // highest client stream id seen
	streams map[uint32]*h2stream // streams still receiving the request
}

// errH2Done ends a connection on purpose (after GOAWAY, or on client GOAWAY).
var errH2Done = errors.New("faultserver: h2 connection done")

func (s *H2Server) serveConn(c net.Conn, num int) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()

	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	hc := &h2conn{s: s, c: c, num: num, streams: make(map[uint32]*h2stream)}
	hc.fr = http2.NewFramer(c, c)
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	hc.henc = hpack.NewEncoder(&hc.hbuf)
	if err := hc.fr.WriteSettings(); err != nil {
		return
	}
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			return // EOF, closed, or malformed input: drop the connection
		}
		if err := hc.handle(f); err != nil {
			return
		}
	}
}

func (hc *h2conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return hc.fr.WriteSettingsAck()
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return hc.fr.WritePing(true, f.Data)
	case *http2.GoAwayFrame:
		return errH2Done
	case *http2.MetaHeadersFrame:
		return hc.onHeaders(f)
	case *http2.DataFrame:
		return hc.onData(f)
	case *http2.HeadersFrame, *http2.ContinuationFrame:
		return errH2Done // cannot happen with ReadMetaHeaders set; be safe
	case *http2.PushPromiseFrame:
		return errH2Done // clients must not push
	}
	// WINDOW_UPDATE, RST_STREAM, PRIORITY and unknown frames: nothing to do.
	// Our responses are tiny, so the client's windows never matter.
	return nil
}

func (hc *h2conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if st, ok := hc.streams[id]; ok {
		// Trailers: only their END_STREAM matters.
		if f.StreamEnded() {
			return hc.complete(id, st)
		}
		return nil
	}
	if id%2 == 0 {
		return errH2Done // not a client stream id
	}
	if id <= hc.lastID {
		return nil // a stream we already closed (e.g. refused): ignore
	}
	hc.lastID = id

	s := hc.s
	s.mu.Lock()
	seq := len(s.log) + 1
	fault := H2Serve
	if seq <= len(s.faults) {
		fault = s.faults[seq-1]
	}
	if fault < H2Serve || fault > H2RefuseAfterBody {
		fault = H2Serve
	}
	s.log = append(s.log, H2Stream{
		Seq:    seq,
		Conn:   hc.num,
		ID:     id,
		Method: f.PseudoValue("method"),
		Path:   f.PseudoValue("path"),
		Fault:  fault,
	})
	s.mu.Unlock()
	st := &h2stream{idx: seq - 1, fault: fault}

	switch fault {
	case H2Refuse:
		return hc.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
	case H2GoAway:
		var last uint32
		if id > 2 {
			last = id - 2
		}
		return hc.goAway(last)
	}
	if f.StreamEnded() {
		return hc.complete(id, st)
	}
	hc.streams[id] = st
	return nil
}

func (hc *h2conn) onData(f *http2.DataFrame) error {
	// Flow-control length includes padding.
	n := f.Header().Length
	if n > 0 {
		if err := hc.fr.WriteWindowUpdate(0, n); err != nil {
			return err
		}
	}
	st, ok := hc.streams[f.StreamID]
	if !ok {
		return nil // closed, refused or unknown stream: ignore
	}
	if size := len(f.Data()); size > 0 {
		hc.s.mu.Lock()
		hc.s.log[st.idx].BodyBytes += int64(size)
		hc.s.mu.Unlock()
	}
	if st.fault == H2RefuseAfterBody {
		delete(hc.streams, f.StreamID)
		return hc.fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
	}
	if f.StreamEnded() {
		return hc.complete(f.StreamID, st)
	}
	if n > 0 {
		return hc.fr.WriteWindowUpdate(f.StreamID, n)
	}
	return nil
}

// complete acts on a stream whose request has fully arrived.
func (hc *h2conn) complete(id uint32, st *h2stream) error {
	delete(hc.streams, id)
	switch st.fault {
	case H2RefuseAfterBody: // no DATA came: no body, or trailers only
		return hc.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
	case H2GoAwayProcessed:
		return hc.goAway(id)
	case H2ResetProtocolError:
		return hc.fr.WriteRSTStream(id, http2.ErrCodeProtocol)
	case H2ResetInternalError:
		return hc.fr.WriteRSTStream(id, http2.ErrCodeInternal)
	}
	return hc.respond(id, st)
}

func (hc *h2conn) respond(id uint32, st *h2stream) error {
	hc.s.mu.Lock()
	e := &hc.s.log[st.idx]
	method, path := e.Method, e.Path
	status := statusForPath(path)
	e.Status = status
	hc.s.mu.Unlock()

	body := "ok\n"
	if status/100 != 2 {
		body = strconv.Itoa(status) + " " + http.StatusText(status)
		body = strings.TrimSpace(body) + "\n"
	}
	noBody := status == http.StatusNoContent || status == http.StatusNotModified

	hc.hbuf.Reset()
	hc.henc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	if !noBody {
		hc.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/plain"})
		hc.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
	}
	headersOnly := noBody || method == http.MethodHead
	if err := hc.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      id,
		BlockFragment: hc.hbuf.Bytes(),
		EndHeaders:    true,
		EndStream:     headersOnly,
	}); err != nil {
		return err
	}
	if headersOnly {
		return nil
	}
	return hc.fr.WriteData(id, true, []byte(body))
}

// goAway sends GOAWAY(NO_ERROR) and ends the connection gracefully: it
// half-closes and drains what the client still sends, so unread input does
// not turn the close into a TCP reset that could destroy the GOAWAY before
// the client reads it.
func (hc *h2conn) goAway(last uint32) error {
	if err := hc.fr.WriteGoAway(last, http2.ErrCodeNo, nil); err != nil {
		return err
	}
	if tc, ok := hc.c.(*net.TCPConn); ok {
		tc.CloseWrite()
		// Bounded so a client that never closes cannot hold us; Close
		// interrupts it too.
		tc.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, tc)
	}
	return errH2Done
}

// statusForPath returns the code in "/s/{code}" (200..599), else 200.
func statusForPath(path string) int {
	path, _, _ = strings.Cut(path, "?")
	rest, ok := strings.CutPrefix(path, "/s/")
	if !ok || len(rest) != 3 {
		return http.StatusOK
	}
	code, err := strconv.Atoi(rest)
	if err != nil || code < 200 || code > 599 {
		return http.StatusOK
	}
	return code
}
