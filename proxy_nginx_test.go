package retrystack_test

// Behind a real proxy: Debian's nginx-light, started by each test on
// 127.0.0.1 with a configuration of its own (internal/testkit/nginxtest),
// in front of an upstream the test controls. Each report is compared with
// nginx's access log send by send. Skipped where nginx is missing;
// scripts/nginx-test.sh (CI) installs it and runs these tests with
// NGINX_REQUIRED=1.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/nginxtest"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// pxProtocols are the client-to-nginx protocols: HTTP/1.1, and h2c with
// prior knowledge.
var pxProtocols = []struct {
	name string
	h2   bool
}{{"HTTP1", false}, {"h2c", true}}

// pxBase is a fresh net/http transport to nginx, h2c when h2.
func pxBase(t *testing.T, h2 bool) *http.Transport {
	tr := &http.Transport{}
	if h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// pxStack is the public retrying transport, policy.Default(), over base.
func pxStack(t *testing.T, base http.RoundTripper, hooks engine.Hooks) http.RoundTripper {
	t.Helper()
	p := policy.Default()
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: base, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// pxUpstream starts the upstream, real net/http, and returns its address
// for proxy_pass. (Registered before nginx, it is closed after it.)
func pxUpstream(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// pxCounts counts the requests the upstream received, per path.
type pxCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts a request for path and returns how many there were so far.
func (c *pxCounts) add(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[path]++
	return c.n[path]
}

func (c *pxCounts) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// pxResult is what the caller got from one operation.
type pxResult struct {
	status int
	body   string
	rep    *engine.Report
	err    error
}

func pxDo(rt http.RoundTripper, req *http.Request) pxResult {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return pxResult{err: err, rep: engine.ReportFrom(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return pxResult{status: resp.StatusCode, body: string(body), rep: engine.ReportOf(resp), err: err}
}

func (r pxResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("error %v, report %v", r.err, r.rep)
	}
	return fmt.Sprintf("%d, report %v", r.status, r.rep)
}

// pxSendBySend fails the test unless the attempts that got an answer are,
// in order, the requests nginx logged, with the same statuses, every
// attempt nginx did not log failed before it was sent, and net/http made
// no send of its own (see pxSendBySendResent).
func pxSendBySend(t *testing.T, rep *engine.Report, logged []nginxtest.Entry) {
	t.Helper()
	pxCompare(t, rep, logged, false)
}

// pxSendBySendResent is pxSendBySend where net/http may have resent a
// request itself (a stream past a GOAWAY's last stream, which nginx never
// processed): the report counts those sends as Transparent, nginx logged
// none of them.
func pxSendBySendResent(t *testing.T, rep *engine.Report, logged []nginxtest.Entry) {
	t.Helper()
	pxCompare(t, rep, logged, true)
}

func pxCompare(t *testing.T, rep *engine.Report, logged []nginxtest.Entry, resent bool) {
	t.Helper()
	if rep == nil {
		t.Fatal("no report")
	}
	var answered, statuses []int
	for _, a := range rep.Attempts {
		if a.Err == nil {
			answered = append(answered, a.Status)
		} else if a.Processed != policy.NotSent {
			t.Errorf("attempt %v (error %v) may have reached nginx, which logged:\n%s", a.Processed, a.Err, nginxtest.Format(logged))
		}
	}
	for _, e := range logged {
		statuses = append(statuses, e.Status)
	}
	if !slices.Equal(answered, statuses) || (!resent && rep.TransparentAttempts() != 0) {
		t.Fatalf("report %v (answers %v, %d transparent sends); nginx logged %v:\n%s", rep, answered, rep.TransparentAttempts(), statuses, nginxtest.Format(logged))
	}
}

// nginx closes an idle keep-alive connection (keepalive_timeout) just as
// net/http takes it from the pool: "http: server closed idle connection",
// nothing written. net/http does not resend a streaming PUT, DELETE or
// unkeyed POST itself; the engine does, and nginx sees each request once.
func TestNginxIdleCloseIsResent(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodPost, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				seen.add(r.URL.Path)
			})
			ngx := nginxtest.Start(t, nginxtest.Config{Server: `
		keepalive_timeout 100ms;
		location / { proxy_pass http://` + up + `; }`})

			var first atomic.Pointer[rttest.HeldEnd]
			tr := pxBase(t, false)
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				pc := rttest.NewHeldEnd(c)
				// The first connection's end is held from the start:
				// nothing but nginx's FIN makes its reads fail.
				if first.CompareAndSwap(nil, pc) {
					pc.Hold()
				}
				return pc, nil
			}
			rt := pxStack(t, tr, engine.Hooks{})

			warm, _ := http.NewRequest(http.MethodGet, ngx.URL+"/warm", nil)
			if r := pxDo(rt, warm); r.err != nil || r.status != 200 {
				t.Fatalf("warm-up: %v", r)
			}
			c := first.Load()
			defer c.Release() // if the test fails before releasing it
			select {
			case <-c.Fin(): // keepalive_timeout: nginx closed the idle connection
			case <-time.After(10 * time.Second):
				t.Fatal("nginx did not close the idle connection (keepalive_timeout 100ms) within 10 s")
			}

			released := false
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused && !released {
					// The pool handed out the connection: now its FIN
					// arrives, and the request waits until net/http
					// has closed the connection for it.
					released = true
					c.Release()
					<-c.Closed()
				}
			}}
			ctx := httptrace.WithClientTrace(context.Background(), trace)
			// A streaming body: net/http cannot make it again.
			req, _ := http.NewRequestWithContext(ctx, method, ngx.URL+"/op", io.NopCloser(strings.NewReader("payload")))
			r := pxDo(rt, req)
			if !released {
				t.Fatal("the pooled connection was not reused: the test did not set up the race")
			}
			if r.err != nil || r.status != 200 {
				t.Fatalf("%s on a connection nginx closed idle: %v; want it resent", method, r)
			}
			logged := ngx.Wait(t, "/op", 1)
			if len(r.rep.Attempts) != 2 || r.rep.Stop != policy.StopSuccess || r.rep.Attempts[0].Processed != policy.NotSent {
				t.Fatalf("report %v; want 2 attempts, the first not sent, success", r.rep)
			}
			pxSendBySend(t, r.rep, logged)
			if logged[0].Method != method || seen.get("/op") != 1 {
				t.Fatalf("nginx logged %s, the upstream saw %d; want %s once", nginxtest.Format(logged), seen.get("/op"), method)
			}
		})
	}
}

// nginx ends an h2c connection with GOAWAY after keepalive_requests
// streams. Requests that follow go on a new connection; each reaches nginx
// once and the report counts it once. Streams the client opened past the
// GOAWAY's last stream (concurrent requests) were never processed:
// net/http resends them itself, whatever their method (the engine gives it
// the kept body), the report counts those sends as transparent, and nginx
// logs each request once.
func TestNginxGoAwayAfterKeepaliveRequests(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				seen.add(r.URL.Path)
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: true, Server: `
		keepalive_requests 3;
		location / { proxy_pass http://` + up + `; }`})
			rt := pxStack(t, pxBase(t, true), engine.Hooks{})

			t.Run("sequential", func(t *testing.T) {
				const n = 7
				for i := range n {
					path := fmt.Sprintf("/seq/%d", i)
					req, _ := http.NewRequest(method, ngx.URL+path, io.NopCloser(strings.NewReader("payload")))
					r := pxDo(rt, req)
					if r.err != nil || r.status != 200 {
						t.Fatalf("request %d: %v", i, r)
					}
					pxSendBySend(t, r.rep, ngx.Wait(t, path, 1))
				}
				conns := map[uint64]int{}
				for _, e := range ngx.Entries(t) {
					if strings.HasPrefix(e.URI, "/seq/") {
						conns[e.Conn]++
					}
				}
				if len(conns) != 3 {
					t.Fatalf("nginx served %d requests on %d connections %v; want 3 (keepalive_requests 3)", n, len(conns), conns)
				}
			})

			t.Run("concurrent", func(t *testing.T) {
				// A fresh connection, one request on it, then 8 at once:
				// nginx takes 2 more and sends GOAWAY; the others' streams
				// are past its last stream.
				tr := pxBase(t, true)
				rt := pxStack(t, tr, engine.Hooks{})
				warm, _ := http.NewRequest(http.MethodGet, ngx.URL+"/warm2", nil)
				if r := pxDo(rt, warm); r.err != nil || r.status != 200 {
					t.Fatalf("warm-up: %v", r)
				}
				const n = 8
				results := make([]pxResult, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						req, _ := http.NewRequest(method, ngx.URL+fmt.Sprintf("/con/%d", i), io.NopCloser(strings.NewReader("payload")))
						results[i] = pxDo(rt, req)
					})
				}
				close(start)
				wg.Wait()
				transparent := 0
				defer func() { t.Logf("%d sends of %d requests were net/http's own resends", transparent, n) }()
				for i, r := range results {
					path := fmt.Sprintf("/con/%d", i)
					if r.err != nil || r.status != 200 {
						t.Errorf("request %d: %v; nginx logged:\n%s", i, r, nginxtest.Format(ngx.Wait(t, path, 0)))
						continue
					}
					pxSendBySendResent(t, r.rep, ngx.Wait(t, path, 1))
					transparent += r.rep.TransparentAttempts()
					if seen.get(path) != 1 {
						t.Errorf("the upstream saw %s %d times", path, seen.get(path))
					}
				}
			})
		})
	}
}

// nginx answers 502 when its upstream closes the connection without an
// answer, or refuses it: a GET is retried, and nginx logged exactly the
// attempts the report counts.
func TestNginxBadGateway(t *testing.T) {
	for _, pr := range pxProtocols {
		t.Run(pr.name, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if seen.add(r.URL.Path) == 1 {
					panic(http.ErrAbortHandler) // the connection closes, no answer
				}
				io.WriteString(w, "ok\n")
			})
			refusing := pxClosedPort(t)
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: pr.h2, Server: `
		location /closes { proxy_pass http://` + up + `; }
		location /refused { proxy_pass http://` + refusing + `; }`})
			rt := pxStack(t, pxBase(t, pr.h2), engine.Hooks{})

			req, _ := http.NewRequest(http.MethodGet, ngx.URL+"/closes", nil)
			r := pxDo(rt, req)
			if r.err != nil || r.status != 200 || r.body != "ok\n" || r.rep.Stop != policy.StopSuccess || len(r.rep.Attempts) != 2 {
				t.Fatalf("upstream closed once: %v; want 200 after a 502", r)
			}
			logged := ngx.Wait(t, "/closes", 2)
			pxSendBySend(t, r.rep, logged)
			if logged[0].Status != 502 || logged[0].UpstreamStatus != "502" || seen.get("/closes") != 2 {
				t.Fatalf("nginx logged:\n%s the upstream saw %d requests; want a 502 of nginx's, then the upstream's 200", nginxtest.Format(logged), seen.get("/closes"))
			}

			req, _ = http.NewRequest(http.MethodGet, ngx.URL+"/refused", nil)
			r = pxDo(rt, req)
			if r.err != nil || r.status != 502 || r.rep.Stop != policy.StopAttemptsExhausted || len(r.rep.Attempts) != 3 {
				t.Fatalf("upstream refusing: %v; want the third 502, attempts-exhausted", r)
			}
			pxSendBySend(t, r.rep, ngx.Wait(t, "/refused", 3))
		})
	}
}

// pxClosedPort returns a local address nothing listens on.
func pxClosedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// nginx answers 504 when its upstream does not answer within
// proxy_read_timeout: a GET is retried, nginx logged the 504 and the 200.
func TestNginxGatewayTimeout(t *testing.T) {
	for _, pr := range pxProtocols {
		t.Run(pr.name, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if seen.add(r.URL.Path) == 1 {
					<-r.Context().Done() // stalls until nginx gives up and closes
					return
				}
				io.WriteString(w, "ok\n")
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: pr.h2, Server: `
		location / { proxy_pass http://` + up + `; proxy_read_timeout 200ms; }`})
			rt := pxStack(t, pxBase(t, pr.h2), engine.Hooks{})

			req, _ := http.NewRequest(http.MethodGet, ngx.URL+"/stalls", nil)
			r := pxDo(rt, req)
			if r.err != nil || r.status != 200 || r.rep.Stop != policy.StopSuccess || len(r.rep.Attempts) != 2 {
				t.Fatalf("upstream stalled once: %v; want 200 after a 504", r)
			}
			logged := ngx.Wait(t, "/stalls", 2)
			pxSendBySend(t, r.rep, logged)
			if logged[0].Status != 504 || seen.get("/stalls") != 2 {
				t.Fatalf("nginx logged:\n%s the upstream saw %d requests; want a 504, then 200", nginxtest.Format(logged), seen.get("/stalls"))
			}
		})
	}
}

// limit_req answers 429 with the Retry-After the proxy adds: the retry,
// and any other request to the host that starts while the host is held,
// reach nginx only after the hold. When the upstream's Retry-After (0) and
// the proxy's (1) are both on a response, the longer counts.
func TestNginxRateLimitRetryAfter(t *testing.T) {
	const hold = time.Second
	const slack = 50 * time.Millisecond // nginx's clock is per event loop turn, in ms
	for _, pr := range pxProtocols {
		t.Run(pr.name, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/busy" && seen.add(r.URL.Path) == 1 {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok\n")
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: pr.h2,
				// One request a second per path, no burst; the proxy adds
				// Retry-After: 1 to its 429s and to the upstream's 503s.
				HTTP: `
	limit_req_zone $uri zone=perpath:1m rate=1r/s;
	map $status $retry_after { 429 1; 503 1; default ""; }`,
				Server: `
		limit_req zone=perpath;
		limit_req_status 429;
		add_header Retry-After $retry_after always;
		location / { proxy_pass http://` + up + `; }`})
			retrying := make(chan engine.Event, 4)
			rt := pxStack(t, pxBase(t, pr.h2), engine.Hooks{OnRetry: func(ev engine.Event) {
				ev.Report = nil // the live report is not read after the call
				retrying <- ev
			}})

			get := func(path string) pxResult {
				req, _ := http.NewRequest(http.MethodGet, ngx.URL+path, nil)
				return pxDo(rt, req)
			}
			if r := get("/a"); r.err != nil || r.status != 200 {
				t.Fatalf("first request: %v", r)
			}
			limited := make(chan pxResult, 1)
			go func() { limited <- get("/a") }() // within the second: 429
			ev := <-retrying
			if !ev.FromHint || ev.Wait < hold {
				t.Errorf("the retry after the 429 waits %v (from the hint: %v); want Retry-After's 1s", ev.Wait, ev.FromHint)
			}
			// The host is held: a request to another path (a zone entry
			// of its own, so nginx would let it through) waits too.
			other := get("/b")
			r := <-limited
			if r.err != nil || r.status != 200 || len(r.rep.Attempts) != 2 || r.rep.Stop != policy.StopSuccess {
				t.Fatalf("rate-limited request: %v; want 200 after a 429", r)
			}
			if other.err != nil || other.status != 200 || len(other.rep.Attempts) != 1 {
				t.Fatalf("request during the hold: %v; want 200 at its first attempt", other)
			}
			a, b := ngx.Wait(t, "/a", 3), ngx.Wait(t, "/b", 1)
			pxSendBySend(t, r.rep, a[1:])
			pxSendBySend(t, other.rep, b)
			if a[1].Status != 429 {
				t.Fatalf("nginx logged:\n%s want 200, 429, 200", nginxtest.Format(a))
			}
			if d := a[2].Time.Sub(a[1].Time); d < hold-slack {
				t.Errorf("the retry reached nginx %v after its 429; want Retry-After's 1s", d)
			}
			if d := b[0].Time.Sub(a[1].Time); d < hold-slack {
				t.Errorf("a request started during the hold reached nginx %v after the 429; want the hold's 1s", d)
			}

			r = get("/busy")
			if r.err != nil || r.status != 200 || len(r.rep.Attempts) != 2 {
				t.Fatalf("upstream 503 with Retry-After 0, the proxy's 1: %v; want 200 after the 503", r)
			}
			busy := ngx.Wait(t, "/busy", 2)
			pxSendBySend(t, r.rep, busy)
			if d := busy[1].Time.Sub(busy[0].Time); d < hold-slack {
				t.Errorf("with Retry-After 0 (upstream) and 1 (proxy), the retry reached nginx %v after the 503; want the longer, 1s", d)
			}
		})
	}
}

// A request already waiting out a Retry-After is held again when a later
// answer asks for longer: nginx's limit_req answers /short with
// Retry-After: 1 while /long is at the upstream, which then answers 503
// with Retry-After: 2. /short's retry, planned for 1 s, reaches nginx
// only once the longer hold has passed.
func TestNginxLongerRetryAfterHoldsWaiters(t *testing.T) {
	const slack = 50 * time.Millisecond // nginx's clock is per event loop turn, in ms
	for _, pr := range pxProtocols {
		t.Run(pr.name, func(t *testing.T) {
			var seen pxCounts
			arrived, answer := make(chan struct{}), make(chan struct{})
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/long" && seen.add(r.URL.Path) == 1 {
					close(arrived)
					<-answer
					w.Header().Set("Retry-After", "2")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok\n")
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: pr.h2,
				HTTP: `
	limit_req_zone $uri zone=perpath:1m rate=1r/s;
	map $status $retry_after { 429 1; default ""; }`,
				Server: `
		location /short {
			limit_req zone=perpath;
			limit_req_status 429;
			add_header Retry-After $retry_after always;
			proxy_pass http://` + up + `;
		}
		location /long { proxy_pass http://` + up + `; }`})
			retrying := make(chan engine.Event, 4)
			rt := pxStack(t, pxBase(t, pr.h2), engine.Hooks{OnRetry: func(ev engine.Event) {
				ev.Report = nil
				retrying <- ev
			}})
			get := func(path string) pxResult {
				req, _ := http.NewRequest(http.MethodGet, ngx.URL+path, nil)
				return pxDo(rt, req)
			}
			if r := get("/short"); r.err != nil || r.status != 200 {
				t.Fatalf("first request to /short: %v", r)
			}
			short, long := make(chan pxResult, 1), make(chan pxResult, 1)
			go func() { long <- get("/long") }()
			<-arrived // /long is at the upstream
			go func() { short <- get("/short") }()
			if ev := <-retrying; ev.Wait < time.Second || !ev.FromHint {
				t.Errorf("/short's retry waits %v (from the hint: %v); want Retry-After's 1s", ev.Wait, ev.FromHint)
			}
			close(answer) // while /short's retry waits: 503, Retry-After: 2
			if ev := <-retrying; ev.Wait < 2*time.Second || !ev.FromHint {
				t.Errorf("/long's retry waits %v (from the hint: %v); want Retry-After's 2s", ev.Wait, ev.FromHint)
			}
			rs, rl := <-short, <-long
			for _, r := range []pxResult{rs, rl} {
				if r.err != nil || r.status != 200 || len(r.rep.Attempts) != 2 || r.rep.Stop != policy.StopSuccess {
					t.Fatalf("%v; want 200 after a 429 or 503", r)
				}
			}
			s, l := ngx.Wait(t, "/short", 3), ngx.Wait(t, "/long", 2)
			pxSendBySend(t, rs.rep, s[1:])
			pxSendBySend(t, rl.rep, l)
			if s[1].Status != 429 || l[0].Status != 503 {
				t.Fatalf("nginx logged:\n%s%s want /short 200, 429, 200 and /long 503, 200", nginxtest.Format(s), nginxtest.Format(l))
			}
			if d := s[2].Time.Sub(l[0].Time); d < 2*time.Second-slack {
				t.Errorf("/short's retry reached nginx %v after /long's 503 (Retry-After: 2); want the longer hold, 2s\n%s%s", d, nginxtest.Format(s), nginxtest.Format(l))
			}
			if d := l[1].Time.Sub(l[0].Time); d < 2*time.Second-slack {
				t.Errorf("/long's retry reached nginx %v after its 503; want Retry-After's 2s", d)
			}
		})
	}
}

// pxBody is a streaming request body (no GetBody, no Seek) that records
// whether it was closed.
type pxBody struct {
	io.Reader
	closed chan struct{}
	once   sync.Once
}

func (b *pxBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// client_max_body_size: nginx answers 413 and the upstream is never
// asked. The 413 is not retried; the caller gets it with nginx's page,
// and the request body is closed, not left open.
func TestNginxBodyTooLarge(t *testing.T) {
	for _, pr := range pxProtocols {
		t.Run(pr.name, func(t *testing.T) {
			var seen pxCounts
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				seen.add(r.URL.Path)
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: pr.h2, Server: `
		client_max_body_size 1k;
		location / { proxy_pass http://` + up + `; }`})
			rt := pxStack(t, pxBase(t, pr.h2), engine.Hooks{})

			for _, tt := range []struct {
				name   string
				body   func() *pxBody
				length int64
			}{
				{"known-length", func() *pxBody {
					return &pxBody{Reader: bytes.NewReader(make([]byte, 4<<10)), closed: make(chan struct{})}
				}, 4 << 10},
				{"streaming", func() *pxBody {
					return &pxBody{Reader: io.LimitReader(pxZeros{}, 64<<10), closed: make(chan struct{})}
				}, -1},
			} {
				t.Run(tt.name, func(t *testing.T) {
					path := "/too-large/" + tt.name
					body := tt.body()
					req, _ := http.NewRequest(http.MethodPut, ngx.URL+path, body)
					req.ContentLength = tt.length
					r := pxDo(rt, req)
					if r.err != nil || r.status != http.StatusRequestEntityTooLarge || len(r.rep.Attempts) != 1 || !strings.Contains(r.body, "413 Request Entity Too Large") {
						t.Fatalf("%v, body %q; want nginx's 413 page, one attempt", r, r.body)
					}
					if r.rep.Stop != policy.StopNonRetryable {
						t.Errorf("stop %s; want %s", r.rep.Stop, policy.StopNonRetryable)
					}
					logged := ngx.Wait(t, path, 1)
					pxSendBySend(t, r.rep, logged)
					if logged[0].UpstreamStatus != "-" || seen.get(path) != 0 {
						t.Fatalf("nginx logged:\n%s the upstream saw %d requests; want none", nginxtest.Format(logged), seen.get(path))
					}
					select {
					case <-body.closed:
					case <-time.After(10 * time.Second):
						t.Fatal("the request body was not closed")
					}
				})
			}
		})
	}
}

type pxZeros struct{}

func (pxZeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// With proxy_request_buffering off nginx streams an upload to its
// upstream and answers 502 as soon as the upstream fails, while the
// client is still sending: here when the client's writer waits for the
// rest of a 300 KiB streaming PUT (no GetBody), which comes as the engine
// releases the 502. The read under way then returns what the producer has
// (the writer's next read stops: its answer was discarded):
//
//   - over HTTP/1.1 net/http reads a body 32 KiB at a time, so what the
//     read under way took fits the 256 KiB replay buffer: the PUT is
//     retried and the upstream receives it whole;
//   - over h2c the same holds for a producer that gives 32 KiB a read;
//   - and on a warm connection, where net/http's HTTP/2 writer asks for
//     up to 512 KiB a read (nginx allows frames of 16 MiB; before its
//     SETTINGS arrive, 16 KiB), with a producer that has the rest at
//     once: a read of a kept body takes no more than the room the
//     buffer has left, so the read under way cannot take it past the
//     buffer. (It did: the retry was not sent, and the operation stopped
//     body-not-replayable after the one send nginx logged.)
func TestNginxEarlyAnswerToUnbufferedUpload(t *testing.T) {
	const size = 300 << 10
	data := []byte(strings.Repeat("0123456789abcdef", size/16))
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	for _, tt := range []struct {
		name  string
		h2    bool
		chunk int
	}{
		{"HTTP1", false, 0},
		{"h2c/pipe", true, 32 << 10},
		{"h2c/all-at-once", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen pxCounts
			// A producer slower than the network: the first 64 KiB at once,
			// the rest as the 502 is released, at most chunk bytes a read
			// (0: as many as asked for, as a file or a buffer gives; 32 KiB:
			// as a pipe fed in 32 KiB writes does).
			body := rttest.NewGatedBody(data, 64<<10, tt.chunk)
			up := pxUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if seen.add(r.URL.Path) == 1 && r.URL.Path == "/upload" {
					// Fails mid-body, once the client's writer waits
					// for the rest: the connection closes at once (a
					// handler's panic would first read on), and nginx
					// answers 502 while the client is still sending.
					io.CopyN(io.Discard, r.Body, 16<<10)
					select {
					case <-body.AtGate():
					case <-time.After(10 * time.Second):
					}
					if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
						c.Close()
					}
					return
				}
				h := sha256.New()
				io.Copy(h, r.Body)
				io.WriteString(w, hex.EncodeToString(h.Sum(nil)))
			})
			ngx := nginxtest.Start(t, nginxtest.Config{HTTP2: tt.h2, Server: `
		location / {
			proxy_pass http://` + up + `;
			proxy_request_buffering off;
			proxy_http_version 1.1;
			client_max_body_size 10m;
		}`})
			defer body.Release()
			tr := pxBase(t, tt.h2)
			base := middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := tr.RoundTrip(r)
				if err == nil && resp.StatusCode == http.StatusBadGateway {
					// The rest of the upload comes as the 502 is released.
					resp.Body = &rttest.CloseHook{ReadCloser: resp.Body, Before: body.Release}
				}
				return resp, err
			})
			rt := pxStack(t, base, engine.Hooks{})
			// A warm connection: its writers size their buffers by the
			// frames nginx allows (net/http's HTTP/2 writer: 16 KiB
			// before nginx's SETTINGS arrive, 512 KiB after).
			warm, _ := http.NewRequest(http.MethodGet, ngx.URL+"/warm", nil)
			if r := pxDo(tr, warm); r.err != nil || r.status != 200 {
				t.Fatalf("warm-up: %v", r)
			}

			req, _ := http.NewRequest(http.MethodPut, ngx.URL+"/upload", body)
			r := pxDo(rt, req)
			if r.err != nil || r.status != 200 || r.body != want || len(r.rep.Attempts) != 2 || r.rep.Stop != policy.StopSuccess {
				t.Fatalf("%v, body %.16s…; want 200 with the SHA-256 of the whole body after a 502", r, r.body)
			}
			logged := ngx.Wait(t, "/upload", 2)
			pxSendBySend(t, r.rep, logged)
			if logged[0].UpstreamStatus != "502" || logged[1].RequestLength < size || seen.get("/upload") != 2 {
				t.Fatalf("nginx logged:\n%s the upstream saw %d requests; want the 502, then the whole body", nginxtest.Format(logged), seen.get("/upload"))
			}
		})
	}
}
