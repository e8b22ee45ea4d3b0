package faultserver

import (
	"bytes"
	"errors"
	"fmt"
	"go/version"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// newH2Client returns a real net/http client speaking prior-knowledge h2c.
func newH2Client() (*http.Client, *http.Transport) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	return &http.Client{Transport: tr}, tr
}

func startH2(t *testing.T, faults ...H2Fault) *H2Server {
	t.Helper()
	s, err := NewH2(H2Config{Faults: faults})
	if err != nil {
		t.Fatalf("NewH2: %v", err)
	}
	return s
}

// do sends one request and returns status and body, or the error.
func do(client *http.Client, req *http.Request) (int, string, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.ProtoMajor != 2 {
		return 0, "", errors.New("response not over HTTP/2: " + resp.Proto)
	}
	return resp.StatusCode, string(b), nil
}

func TestH2FaultString(t *testing.T) {
	tests := []struct {
		f    H2Fault
		want string
	}{
		{H2Serve, "serve"},
		{H2Refuse, "refuse"},
		{H2GoAway, "goaway"},
		{H2GoAwayProcessed, "goaway-processed"},
		{H2ResetProtocolError, "reset-protocol-error"},
		{H2ResetInternalError, "reset-internal-error"},
		{H2RefuseAfterBody, "refuse-after-body"},
		{H2Fault(42), "H2Fault(42)"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("H2Fault(%d).String() = %q, want %q", int(tt.f), got, tt.want)
		}
	}
}

// TestH2Client documents how net/http's own HTTP/2 client reacts to each
// fault, which is what the server exists to reproduce.
func TestH2Client(t *testing.T) {
	body := strings.Repeat("x", 100)
	big := strings.Repeat("y", 1<<20) // well past the 64 KiB initial windows

	tests := []struct {
		name       string
		faults     []H2Fault
		method     string
		path       string
		body       string // sent via bytes.Reader, so GetBody is set
		wantErr    bool
		wantStatus int
		wantBody   string
		wantConns  int // connections that carried streams
		wantLog    []H2Stream
	}{
		{
			// REFUSED_STREAM means "not processed": resent at once on the same connection.
			name: "refuse GET is retried on the same conn", faults: []H2Fault{H2Refuse},
			method: "GET", path: "/",
			wantStatus: 200, wantBody: "ok\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Fault: H2Refuse},
				{Seq: 2, Conn: 1, ID: 3, Method: "GET", Path: "/", Fault: H2Serve, Status: 200},
			},
		},
		{
			// A replayable body is rewound with GetBody and sent again in full.
			name: "refuse POST with GetBody is resent", faults: []H2Fault{H2Refuse},
			method: "POST", path: "/", body: body,
			wantStatus: 200, wantBody: "ok\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "POST", Path: "/", Fault: H2Refuse},
				{Seq: 2, Conn: 1, ID: 3, Method: "POST", Path: "/", BodyBytes: int64(len(body)), Fault: H2Serve, Status: 200},
			},
		},
		{
			// Stream above last-stream-id: not processed, retried on a new connection.
			name: "goaway GET is retried on a new conn", faults: []H2Fault{H2GoAway},
			method: "GET", path: "/",
			wantStatus: 200, wantBody: "ok\n", wantConns: 2,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Fault: H2GoAway},
				{Seq: 2, Conn: 2, ID: 1, Method: "GET", Path: "/", Fault: H2Serve, Status: 200},
			},
		},
		{
			// Stream within last-stream-id: maybe processed, so never resent, even for GET.
			name: "goaway-processed GET fails", faults: []H2Fault{H2GoAwayProcessed},
			method: "GET", path: "/",
			wantErr: true, wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Fault: H2GoAwayProcessed},
			},
		},
		{
			// net/http also resends after a peer's RST_STREAM(PROTOCOL_ERROR)
			// (golang/go#47635), even though the request was fully received,
			// and it stops reusing that connection.
			name: "reset-protocol-error GET is retried on a new conn", faults: []H2Fault{H2ResetProtocolError},
			method: "GET", path: "/",
			wantStatus: 200, wantBody: "ok\n", wantConns: 2,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Fault: H2ResetProtocolError},
				{Seq: 2, Conn: 2, ID: 1, Method: "GET", Path: "/", Fault: H2Serve, Status: 200},
			},
		},
		{
			name: "serve status from path", method: "GET", path: "/s/503",
			wantStatus: 503, wantBody: "503 Service Unavailable\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/s/503", Status: 503},
			},
		},
		{
			name: "serve status ignores query", method: "GET", path: "/s/418?a=b",
			wantStatus: 418, wantBody: "418 I'm a teapot\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/s/418?a=b", Status: 418},
			},
		},
		{
			name: "serve invalid status path is 200", method: "GET", path: "/s/999",
			wantStatus: 200, wantBody: "ok\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/s/999", Status: 200},
			},
		},
		{
			name: "serve root", faults: []H2Fault{H2Serve}, method: "GET", path: "/",
			wantStatus: 200, wantBody: "ok\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Status: 200},
			},
		},
		{
			// Only completes if the server keeps both flow-control windows open.
			name: "serve 1 MiB POST", method: "POST", path: "/s/201", body: big,
			wantStatus: 201, wantBody: "ok\n", wantConns: 1,
			wantLog: []H2Stream{
				{Seq: 1, Conn: 1, ID: 1, Method: "POST", Path: "/s/201", BodyBytes: 1 << 20, Status: 201},
			},
		},
	}
	if version.Compare(runtime.Version(), "go1.27") >= 0 {
		// Go 1.27's HTTP/2 client (net/http/internal/http2) no longer
		// resends after a peer's RST_STREAM(PROTOCOL_ERROR): the caller
		// gets the stream error, and the retry layer decides.
		for i := range tests {
			if tests[i].faults != nil && tests[i].faults[0] == H2ResetProtocolError {
				tests[i].name = "reset-protocol-error GET fails (Go 1.27)"
				tests[i].wantErr, tests[i].wantConns = true, 1
				tests[i].wantLog = tests[i].wantLog[:1]
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := startH2(t, tt.faults...)
			defer s.Close()
			client, tr := newH2Client()
			defer tr.CloseIdleConnections()

			var rd io.Reader
			if tt.body != "" {
				rd = bytes.NewReader([]byte(tt.body))
			}
			req, err := http.NewRequest(tt.method, s.URL()+tt.path, rd)
			if err != nil {
				t.Fatal(err)
			}
			status, gotBody, err := do(client, req)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got status %d, want an error", status)
				}
			} else {
				if err != nil {
					t.Fatalf("request failed: %v", err)
				}
				if status != tt.wantStatus || gotBody != tt.wantBody {
					t.Errorf("got %d %q, want %d %q", status, gotBody, tt.wantStatus, tt.wantBody)
				}
			}
			// Conns() counts every accepted connection, including spares
			// net/http sometimes dials and drops unused (and, with many test
			// processes, strays from another process's client that dialed a
			// recycled port). So count the connections that carried streams.
			log, used := renumberConns(s.Log())
			if used != tt.wantConns {
				t.Errorf("streams used %d connections, want %d", used, tt.wantConns)
			}
			if got := s.Conns(); got < tt.wantConns {
				t.Errorf("Conns() = %d, want at least %d", got, tt.wantConns)
			}
			if got := s.Streams(); got != len(tt.wantLog) {
				t.Errorf("Streams() = %d, want %d", got, len(tt.wantLog))
			}
			if diff := cmp.Diff(tt.wantLog, log); diff != "" {
				t.Errorf("Log() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestH2RefuseNonReplayableBody: without GetBody, net/http cannot resend the
// refused POST, so the caller gets an error.
func TestH2RefuseNonReplayableBody(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startH2(t, H2Refuse)
	defer s.Close()
	client, tr := newH2Client()
	defer tr.CloseIdleConnections()

	// Larger than the 64 KiB stream window, so the refusal may land
	// mid-body; either way the request cannot be resent.
	body := io.NopCloser(strings.NewReader(strings.Repeat("z", 100<<10)))
	req, err := http.NewRequest("POST", s.URL()+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody != nil {
		t.Fatal("test setup: GetBody should be nil")
	}
	status, _, err := do(client, req)
	if err == nil {
		t.Fatalf("got status %d, want an error", status)
	}
	want := []H2Stream{{Seq: 1, Conn: 1, ID: 1, Method: "POST", Path: "/", Fault: H2Refuse}}
	if log, _ := renumberConns(s.Log()); !cmp.Equal(want, log) {
		t.Errorf("Log() mismatch (-want +got):\n%s", cmp.Diff(want, log))
	}
}

// TestH2RefuseAfterBody: a refusal that waits for the body's first bytes
// leaves net/http no choice, whatever the timing: a body without GetBody
// has been read, so it is not resent; one with GetBody is. A GET, with no
// body, is refused at its HEADERS and resent.
func TestH2RefuseAfterBody(t *testing.T) {
	for _, tt := range []struct {
		name    string
		body    func() io.Reader // nil: a GET
		getBody bool             // a GetBody that works until the body is read (a replay buffer that keeps nothing)
		wantErr bool
		streams int
	}{
		{"streaming POST", func() io.Reader { return io.NopCloser(strings.NewReader("stream")) }, false, true, 1},
		{"streaming POST, GetBody until read", func() io.Reader { return &readOnce{r: strings.NewReader("stream")} }, true, true, 1},
		{"POST with GetBody", func() io.Reader { return strings.NewReader("bytes") }, false, false, 2},
		{"GET", nil, false, false, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := startH2(t, H2RefuseAfterBody)
			defer s.Close()
			client, tr := newH2Client()
			defer tr.CloseIdleConnections()
			method, body := "GET", io.Reader(nil)
			if tt.body != nil {
				method, body = "POST", tt.body()
			}
			req, err := http.NewRequest(method, s.URL()+"/", body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.getBody {
				ro := body.(*readOnce)
				req.GetBody = func() (io.ReadCloser, error) {
					if ro.read.Load() {
						return nil, errors.New("read already")
					}
					return io.NopCloser(strings.NewReader("stream")), nil
				}
			}
			status, _, err := do(client, req)
			if (err != nil) != tt.wantErr {
				t.Fatalf("status %d, error %v; want an error: %v", status, err, tt.wantErr)
			}
			log := s.Log()
			if len(log) != tt.streams || log[0].Fault != H2RefuseAfterBody {
				t.Fatalf("log %+v: want %d streams, the first refused after its body", log, tt.streams)
			}
			if tt.body != nil && log[0].BodyBytes == 0 {
				t.Errorf("refused stream's BodyBytes 0: refused before the body arrived")
			}
		})
	}
}

// TestH2RefuseAfterBodyWithoutData: a stream that ends with no DATA frame,
// at its HEADERS or with trailers only, is refused when it ends.
func TestH2RefuseAfterBodyWithoutData(t *testing.T) {
	for _, trailers := range []bool{false, true} {
		t.Run(fmt.Sprintf("trailers=%v", trailers), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := startH2(t, H2RefuseAfterBody)
			defer s.Close()
			rc := dialRaw(t, s)
			defer rc.c.Close()
			rc.headers(5, "/", !trailers)
			if trailers {
				rc.hbuf.Reset()
				rc.henc.WriteField(hpack.HeaderField{Name: "x-trailer", Value: "1"})
				if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: rc.hbuf.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
					t.Fatal(err)
				}
			}
			if got := rc.next(); got != "RST_STREAM REFUSED_STREAM" {
				t.Errorf("got %q, want the stream refused", got)
			}
		})
	}
}

// readOnce is a body that remembers it was read.
type readOnce struct {
	r    io.Reader
	read atomic.Bool
}

func (b *readOnce) Read(p []byte) (int, error) { b.read.Store(true); return b.r.Read(p) }
func (b *readOnce) Close() error               { return nil }

// TestH2FaultsCountAcrossConns: fault indexes are global arrival order, not
// per connection.
func TestH2FaultsCountAcrossConns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startH2(t, H2Serve, H2GoAway, H2Refuse)
	defer s.Close()
	client, tr := newH2Client()
	defer tr.CloseIdleConnections()

	for i := range 2 {
		req, _ := http.NewRequest("GET", s.URL()+"/", nil)
		if status, _, err := do(client, req); err != nil || status != 200 {
			t.Fatalf("request %d: status %d, err %v", i, status, err)
		}
	}
	want := []H2Stream{
		{Seq: 1, Conn: 1, ID: 1, Method: "GET", Path: "/", Status: 200},
		{Seq: 2, Conn: 1, ID: 3, Method: "GET", Path: "/", Fault: H2GoAway},
		{Seq: 3, Conn: 2, ID: 1, Method: "GET", Path: "/", Fault: H2Refuse},
		{Seq: 4, Conn: 2, ID: 3, Method: "GET", Path: "/", Status: 200},
	}
	if log, _ := renumberConns(s.Log()); !cmp.Equal(want, log) {
		t.Errorf("Log() mismatch (-want +got):\n%s", cmp.Diff(want, log))
	}
}

// renumberConns numbers connections 1, 2, ... in order of their first stream,
// skipping connections that carried none, and returns how many carried one.
func renumberConns(log []H2Stream) ([]H2Stream, int) {
	num := map[int]int{}
	for i, e := range log {
		if _, ok := num[e.Conn]; !ok {
			num[e.Conn] = len(num) + 1
		}
		log[i].Conn = num[e.Conn]
	}
	return log, len(num)
}

// TestH2Concurrent exercises the server and its accessors from many
// goroutines (meaningful under -race).
func TestH2Concurrent(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startH2(t)
	defer s.Close()
	client, tr := newH2Client()
	defer tr.CloseIdleConnections()

	// Warm up first: concurrent requests on a cold transport each dial,
	// and the spare connections are dropped at random times.
	req, _ := http.NewRequest("POST", s.URL()+"/s/202", strings.NewReader("hello"))
	if _, _, err := do(client, req); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", s.URL()+"/s/202", strings.NewReader("hello"))
			status, _, err := do(client, req)
			if err == nil && status != 202 {
				err = errors.New("unexpected status")
			}
			errs <- err
			_ = s.Log()
			_ = s.Streams() + s.Conns()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	log := s.Log()
	if len(log) != n+1 {
		t.Fatalf("got %d streams, want %d", len(log), n+1)
	}
	for i, e := range log {
		if e.Seq != i+1 || e.Status != 202 || e.BodyBytes != 5 {
			t.Errorf("log[%d] = %+v", i, e)
		}
	}
}

// rawConn is a hand-driven HTTP/2 client connection for frame-level checks.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

func dialRaw(t *testing.T, s *H2Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	// Safety net so a broken server fails the test instead of hanging it.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	rc := &rawConn{t: t, c: c, fr: http2.NewFramer(c, c)}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.henc = hpack.NewEncoder(&rc.hbuf)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *rawConn) headers(id uint32, path string, endStream bool) {
	rc.t.Helper()
	rc.hbuf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "x"},
		{Name: ":path", Value: path},
	} {
		rc.henc.WriteField(f)
	}
	err := rc.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndHeaders: true, EndStream: endStream,
	})
	if err != nil {
		rc.t.Fatal(err)
	}
}

// next returns the next frame that is not connection housekeeping, as a
// short description; "EOF" when the server closed the connection.
func (rc *rawConn) next() string {
	rc.t.Helper()
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "EOF"
			}
			rc.t.Fatalf("ReadFrame: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame, *http2.WindowUpdateFrame:
			continue
		case *http2.PingFrame:
			return "PING ack=" + strconv.FormatBool(f.IsAck()) + " " + string(f.Data[:])
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "GOAWAY last=" + strconv.FormatUint(uint64(f.LastStreamID), 10) + " " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			return "HEADERS :status=" + f.PseudoValue("status") + " end=" + strconv.FormatBool(f.StreamEnded())
		case *http2.DataFrame:
			return "DATA " + string(f.Data()) + " end=" + strconv.FormatBool(f.StreamEnded())
		default:
			return "unexpected " + f.Header().Type.String()
		}
	}
}

// TestH2Frames checks the exact frames each fault produces, independent of
// any client's retry logic. The request goes on stream 5 so GOAWAY's
// last-stream-id is distinguishable.
func TestH2Frames(t *testing.T) {
	tests := []struct {
		fault H2Fault
		want  []string
	}{
		{H2Serve, []string{"HEADERS :status=200 end=false", "DATA ok\n end=true"}},
		{H2Refuse, []string{"RST_STREAM REFUSED_STREAM"}},
		{H2GoAway, []string{"GOAWAY last=3 NO_ERROR", "EOF"}},
		{H2GoAwayProcessed, []string{"GOAWAY last=5 NO_ERROR", "EOF"}},
		{H2ResetProtocolError, []string{"RST_STREAM PROTOCOL_ERROR"}},
		{H2RefuseAfterBody, []string{"RST_STREAM REFUSED_STREAM"}},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := startH2(t, tt.fault)
			defer s.Close()
			rc := dialRaw(t, s)
			defer rc.c.Close()

			if err := rc.fr.WritePing(false, [8]byte{'p', 'i', 'n', 'g', 'd', 'a', 't', 'a'}); err != nil {
				t.Fatal(err)
			}
			if got := rc.next(); got != "PING ack=true pingdata" {
				t.Fatalf("after PING got %q", got)
			}
			// Header and body in separate frames: the body follows
			// regardless of what the server did with the HEADERS.
			rc.headers(5, "/", false)
			if err := rc.fr.WriteData(5, true, []byte("body")); err != nil {
				t.Fatal(err)
			}
			var got []string
			for range tt.want {
				got = append(got, rc.next())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("frames mismatch (-want +got):\n%s", diff)
			}
			bodyBytes := int64(4)
			if tt.fault == H2Refuse || tt.fault == H2GoAway {
				bodyBytes = 0 // acted on HEADERS, before the body
			}
			if e := s.Log()[0]; e.BodyBytes != bodyBytes || e.Fault != tt.fault {
				t.Errorf("log entry %+v, want BodyBytes %d, Fault %v", e, bodyBytes, tt.fault)
			}
		})
	}
}

// TestH2MalformedInput: bad input only drops that connection; the server
// keeps serving others.
func TestH2MalformedInput(t *testing.T) {
	tests := []struct {
		name string
		send func(rc *rawConn) error
	}{
		{"DATA on stream 0", func(rc *rawConn) error {
			return rc.fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x"))
		}},
		{"bad HPACK", func(rc *rawConn) error {
			return rc.fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1, []byte{0xff, 0xff, 0xff, 0xff})
		}},
		{"even stream id", func(rc *rawConn) error {
			rc.headers(2, "/", true)
			return nil
		}},
		{"truncated frame", func(rc *rawConn) error {
			if _, err := rc.c.Write([]byte{0, 0, 9, 0, 1, 0, 0, 0, 1, 'x'}); err != nil {
				return err
			}
			return rc.c.(*net.TCPConn).CloseWrite()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			s := startH2(t)
			defer s.Close()
			rc := dialRaw(t, s)
			defer rc.c.Close()
			if err := tt.send(rc); err != nil {
				t.Fatal(err)
			}
			if got := rc.next(); got != "EOF" {
				t.Fatalf("got %q, want the server to close the connection", got)
			}
			assertServes(t, s)
		})
	}

	t.Run("bad preface", func(t *testing.T) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		s := startH2(t)
		defer s.Close()
		c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("Read = %d, %v; want the server to close without replying", n, err)
		}
		assertServes(t, s)
	})
}

func assertServes(t *testing.T, s *H2Server) {
	t.Helper()
	client, tr := newH2Client()
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", s.URL()+"/", nil)
	if status, _, err := do(client, req); err != nil || status != 200 {
		t.Fatalf("server no longer serves: status %d, err %v", status, err)
	}
}

// TestH2Close: Close tears down live connections (an idle pooled one and one
// mid-request) and leaves no goroutine behind; it is idempotent.
func TestH2Close(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startH2(t)
	client, tr := newH2Client()
	defer tr.CloseIdleConnections()

	req, _ := http.NewRequest("GET", s.URL()+"/", nil)
	if _, _, err := do(client, req); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, s)
	defer rc.c.Close()
	rc.headers(1, "/", false) // body never comes: the server waits
	// Frames are handled in order, so the PING ack means the stream is open.
	if err := rc.fr.WritePing(false, [8]byte{}); err != nil {
		t.Fatal(err)
	}
	if got := rc.next(); !strings.HasPrefix(got, "PING ack=true") {
		t.Fatalf("got %q, want PING ack", got)
	}

	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := rc.next(); got != "EOF" {
		t.Errorf("raw conn after Close: got %q, want EOF", got)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := s.Streams(); got != 2 {
		t.Errorf("Streams() = %d, want 2", got)
	}
}

func TestH2ZeroValue(t *testing.T) {
	var s H2Server
	if s.URL() != "" || s.Streams() != 0 || s.Conns() != 0 || s.Log() != nil {
		t.Error("zero H2Server is not empty")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
