package retrystack_test

// The net/http boundary, through the whole default stack and real servers:
// each test fails on the defect it is named after (docs/reliability.md).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// stallServer answers with status and a header Content-Length of declared,
// sends the first 100 bytes, and stalls until the test ends; the last of
// its answers (after fails of them) is a plain 200.
// With h2 it speaks HTTP/2 over TLS.
func stallServer(t *testing.T, h2 bool, fails int, status, declared int, location string) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(n.Add(1)) > fails {
			io.WriteString(w, "ok")
			return
		}
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.Header().Set("Content-Length", fmt.Sprint(declared))
		w.WriteHeader(status)
		w.Write([]byte(strings.Repeat("x", 100)))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handlers
	return srv
}

func fastPolicy() *policy.Policy {
	p := policy.Default()
	p.Backoff.Base = time.Microsecond
	return &p
}

// A discarded body that stalls does not hold the operation: a long one is
// closed unread, a short one is drained for a few milliseconds. Without the
// fix each of these waits for the test's 20 s deadline.
func TestStalledDiscardedBodyDoesNotHold(t *testing.T) {
	for _, tt := range []struct {
		name             string
		status, declared int
		location         string
	}{
		{"retried 503, long body", 503, 10000, ""},
		{"retried 503, short body", 503, 1000, ""},
		{"followed 302, long body", 302, 10000, "/next"},
		{"followed 302, short body", 302, 1000, "/next"},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/h2=%v", tt.name, h2), func(t *testing.T) {
				srv := stallServer(t, h2, 1, tt.status, tt.declared, tt.location)
				tr := &http.Transport{}
				if h2 {
					tr = srv.Client().Transport.(*http.Transport)
				}
				defer tr.CloseIdleConnections()
				client, err := retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: tr})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("the stalled body held the operation: %v", err)
				}
				defer resp.Body.Close()
				if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
					t.Errorf("final body %q, %v", b, err)
				}
				if h2 && resp.ProtoMajor != 2 {
					t.Errorf("spoke %s, want HTTP/2", resp.Proto)
				}
			})
		}
	}
}

// recorder keeps what a server saw, in order.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.seen = append(r.seen, s); r.mu.Unlock() }

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Prepare changes each attempt's own request: the server sees one
// signature per attempt, and the caller's URL and headers stay as they were.
func TestPrepareDoesNotReachTheCallersRequest(t *testing.T) {
	var rec recorder
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r.URL.RawQuery + " " + r.Header.Get("X-Sig"))
		if n.Add(1) < 3 {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	e, err := engine.New(engine.Config{Policy: *fastPolicy(), Prepare: func(req *http.Request, n int) error {
		q := req.URL.Query()
		q.Add("sig", fmt.Sprint(n))
		req.URL.RawQuery = q.Encode()
		req.Header.Add("X-Sig", fmt.Sprint(n))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL+"/p?a=1", nil)
	req.Header.Set("X-Caller", "1")
	resp, err := e.Layer().Wrap(tr).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []string{"a=1&sig=1 1", "a=1&sig=2 2", "a=1&sig=3 3"}
	if diff := cmp.Diff(want, rec.get()); diff != "" {
		t.Errorf("what the server saw (-want +got):\n%s", diff)
	}
	if req.URL.RawQuery != "a=1" || len(req.Header) != 1 {
		t.Errorf("caller's request changed: query %q, header %v", req.URL.RawQuery, req.Header)
	}
}

// A download that fails is no success: the read returns an *engine.Error
// with the report, whose stop says body-failed, with or without a deadline.
// The fault server promises 1000 bytes, sends 500 and resets.
func TestBodyFailureIsReported(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	timed := fastPolicy()
	timed.Timeout = time.Hour
	for name, p := range map[string]*policy.Policy{"no deadline": fastPolicy(), "deadline": timed} {
		t.Run(name, func(t *testing.T) {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client, err := retrystack.NewClient(retrystack.Config{Policy: p, Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get(srv.URL() + "/truncated?reset=1")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			var ee *engine.Error
			if !errors.As(err, &ee) {
				t.Fatalf("read error %T %v, want an *engine.Error", err, err)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) && !isReset(err) {
				t.Errorf("the cause is lost: %v", err)
			}
			if rep := engine.ReportOf(resp); rep == nil || rep.Stop != policy.StopBodyFailed || ee.Report != rep {
				t.Errorf("report %v, want stop %s, the same as the error's", rep, policy.StopBodyFailed)
			}
		})
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// trackingBase wraps a real transport and reports whether every response
// body it returned was closed.
type trackingBase struct {
	tr     *http.Transport
	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return b.ReadCloser.Close() }

func (b *trackingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{ReadCloser: resp.Body}
	resp.Body = tb
	b.mu.Lock()
	b.bodies = append(b.bodies, tb)
	b.mu.Unlock()
	return resp, nil
}

func (b *trackingBase) open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, body := range b.bodies {
		if !body.closed.Load() {
			n++
		}
	}
	return n
}

// A hook that panics still lets the engine release the response it holds;
// the panic reaches the caller.
func TestHookPanicReleasesTheResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		io.WriteString(w, "busy")
	}))
	defer srv.Close()
	boom := func() { panic("hook failed") }
	for name, hooks := range map[string]engine.Hooks{
		"OnAttempt": {OnAttempt: func(engine.Event) { boom() }},
		"OnPitfall": {OnPitfall: func(engine.Event) { boom() }},
		"OnGiveUp":  {OnGiveUp: func(*engine.Report) { boom() }},
	} {
		t.Run(name, func(t *testing.T) {
			base := &trackingBase{tr: &http.Transport{}}
			defer base.tr.CloseIdleConnections()
			p := fastPolicy()
			p.Timeout = time.Hour
			s, err := retrystack.NewStack(retrystack.Config{Policy: p, Hooks: hooks})
			if err != nil {
				t.Fatal(err)
			}
			recovered := func() (v any) {
				defer func() { v = recover() }()
				resp, err := retrystack.Client(s, base).Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				return nil
			}()
			if recovered != "hook failed" {
				t.Fatalf("recovered %v, want the hook's panic", recovered)
			}
			if n := base.open(); n > 0 {
				t.Errorf("%d response bodies left open by the panic", n)
			}
		})
	}
}

// The cookie layer stores a cookie under the hop that set it, whatever the
// order: a host-only cookie of origin B is never sent to origin A.
func TestCookiesStoredUnderTheHopThatSetThem(t *testing.T) {
	var seenA, seenB recorder
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenB.add(r.Header.Get("Cookie"))
		http.SetCookie(w, &http.Cookie{Name: "b", Value: "1"})
	}))
	defer b.Close()
	// A is the same server on another host name: a different origin.
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenA.add(r.Header.Get("Cookie"))
		if r.URL.Path == "/go" {
			http.Redirect(w, r, b.URL+"/set", http.StatusFound)
		}
	}))
	defer a.Close()
	aURL := strings.Replace(a.URL, "127.0.0.1", "localhost", 1)
	orders := map[string][2]string{"default": {}, "cookies above redirect": {"redirect", "cookies"}}
	for name, swap := range orders {
		t.Run(name, func(t *testing.T) {
			seenA, seenB = recorder{}, recorder{}
			s, err := retrystack.NewStack(retrystack.Config{Policy: fastPolicy(), Cookies: cookiejar.Config{Jar: cookiejar.NewJar()}})
			if err != nil {
				t.Fatal(err)
			}
			if swap[0] != "" {
				if s, err = s.Swap(swap[0], swap[1]); err != nil {
					t.Fatal(err)
				}
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := retrystack.Client(s, tr)
			for _, u := range []string{aURL + "/go", aURL + "/after", b.URL + "/after"} {
				resp, err := c.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if diff := cmp.Diff([]string{"", ""}, seenA.get()); diff != "" {
				t.Errorf("origin A was sent (-want +got):\n%s", diff)
			}
			if got := seenB.get(); got[len(got)-1] != "b=1" {
				t.Errorf("origin B was sent %q, want its own cookie back", got)
			}
		})
	}
}

// Cookies follow a custom Host, as with net/http's Client: set for the
// virtual host, sent back to it, and not to the bare address.
func TestCookiesFollowRequestHost(t *testing.T) {
	var seen recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Host + " " + r.Header.Get("Cookie"))
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "v", Value: "1"})
		}
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	jar := cookiejar.Config{Jar: cookiejar.NewJar()}
	c, err := retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: tr, Cookies: jar})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, host string }{{"/set", "virtual.test"}, {"/get", "virtual.test"}, {"/get", ""}} {
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		req.Host = tt.host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	bare := strings.TrimPrefix(srv.URL, "http://")
	want := []string{"virtual.test ", "virtual.test v=1", bare + " "}
	if diff := cmp.Diff(want, seen.get()); diff != "" {
		t.Errorf("host and cookies the server saw (-want +got):\n%s", diff)
	}
}

// Customising the statuses of the default policy keeps it safe: a POST
// that gets a 503 is sent once.
func TestRulesAreSafeByDefault(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	p := fastPolicy()
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503)}.Classify
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Policy: p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(srv.URL+"/orders", "text/plain", strings.NewReader("order"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := posts.Load(); n != 1 {
		t.Errorf("the POST was sent %d times", n)
	}
	if rep := engine.ReportOf(resp); rep.Stop != policy.StopNotIdempotent {
		t.Errorf("stop %s, want %s", rep.Stop, policy.StopNotIdempotent)
	}
}

// A stack over a transport that hands back a response with a nil Body
// behaves as net/http's Client does with one: an empty body, no panic,
// whatever the configuration.
func TestNilBodyFromMockTransport(t *testing.T) {
	mock := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Request: req}, nil
	})
	for _, fail := range []bool{false, true} {
		s, err := retrystack.NewStack(retrystack.Config{Policy: fastPolicy(), FailOnExhausted: fail})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := retrystack.Client(s, mock).Get("http://example.test/")
		switch {
		case fail && engine.ReportFrom(err) == nil:
			t.Errorf("FailOnExhausted: %v, want an error with the report", err)
		case !fail && (err != nil || resp.StatusCode != 503):
			t.Errorf("got %v, %v", resp, err)
		case !fail:
			if b, err := io.ReadAll(resp.Body); len(b) != 0 || err != nil {
				t.Errorf("body %q, %v", b, err)
			}
		}
	}
}

// An upgrade through the whole stack, deadlines and a timeout layer
// included, hands back the connection: writable, and still open once the
// deadlines are released.
func TestUpgradeKeepsTheConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf.Flush()
		io.Copy(conn, buf) // echo until the client closes
	}))
	defer srv.Close()
	p := fastPolicy()
	p.Timeout, p.AttemptTimeout = time.Hour, time.Minute
	s, err := retrystack.NewStack(retrystack.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := retrystack.Client(s, tr).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("the 101's body is a %T, not a connection", resp.Body)
	}
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping" {
		t.Errorf("echo %q, %v", got, err)
	}
	if rep := engine.ReportOf(resp); rep == nil || len(rep.Attempts) != 1 || rep.Stop != policy.StopSuccess {
		t.Errorf("report %v", rep)
	}
}

// slowBody answers a few bytes at a time, slowly: a drain that the
// discard's timer closes while a Read is running.
type slowBody struct{ r io.Reader }

func (b *slowBody) Read(p []byte) (int, error) {
	time.Sleep(2 * wire.DrainTime) // slower than the drain's bound, on purpose: not a timing assertion
	return b.r.Read(p[:min(len(p), 2)])
}

func (b *slowBody) Close() error { return nil }

// A discarded hop whose body is still being read when the drain's timer
// closes it: Close and Read meet in the engine's body wrapper, which must
// take it (run under -race).
func TestDrainClosedUnderARead(t *testing.T) {
	base := middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/a" {
			return &http.Response{StatusCode: 302, Header: http.Header{"Location": {"/b"}}, ContentLength: 10,
				Body: &slowBody{strings.NewReader("0123456789")}, Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	c, err := retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: base})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		resp, err := c.Get("http://example.test/a")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// A mock base that leaves resp.Request unset still gets its report: the
// boundary fills it in, as net/http's Transport would have.
func TestReportWithoutResponseRequest(t *testing.T) {
	var n atomic.Int32
	base := middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
		code := 503
		if n.Add(1) > 1 {
			code = 200
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x"))}, nil
	})
	for name, build := range map[string]func() (*http.Client, error){
		"NewClient": func() (*http.Client, error) {
			return retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: base})
		},
		"NewTransport": func() (*http.Client, error) {
			rt, err := retrystack.NewTransport(retrystack.Config{Policy: fastPolicy(), Transport: base})
			return &http.Client{Transport: rt}, err
		},
	} {
		n.Store(0)
		c, err := build()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get("http://example.test/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rep := engine.ReportOf(resp); rep == nil || len(rep.Attempts) != 2 {
			t.Errorf("%s: report %v, want 2 attempts", name, rep)
		}
	}
}

// Policy.Timeout bounds the whole operation, every redirect hop included:
// the attempts of all hops run under one and the same deadline, fixed
// when the first hop started.
func TestTimeoutCoversEveryHop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/end" {
			http.Redirect(w, r, "/end", http.StatusFound)
		}
	}))
	defer srv.Close()
	var deadlines []time.Time
	watch := middleware.Layer{Name: "watch", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			dl, ok := req.Context().Deadline()
			if !ok {
				t.Errorf("%s sent without a deadline", req.URL.Path)
			}
			deadlines = append(deadlines, dl)
			return next.RoundTrip(req)
		})
	}}
	p := fastPolicy()
	p.Timeout = time.Hour
	s, err := retrystack.NewStack(retrystack.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.InsertAfter("retry", watch); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := retrystack.Client(s, tr).Get(srv.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(deadlines) != 2 || !deadlines[0].Equal(deadlines[1]) {
		t.Errorf("deadlines of the two hops %v, want one and the same", deadlines)
	}
}
