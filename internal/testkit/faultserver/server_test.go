package faultserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start returns a fault server and a client on a fresh transport that does
// not follow redirects; both are closed when the test ends.
func start(t *testing.T) (*faultserver.Server, *http.Client) {
	t.Helper()
	s, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{
		Transport:     &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		c.CloseIdleConnections()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, c
}

type answer struct {
	Status     int
	Body       string
	RetryAfter string
	Location   string
}

func do(t *testing.T, c *http.Client, method, url string, body string) (answer, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, string(b), resp.Header.Get("Retry-After"), resp.Header.Get("Location")}, nil
}

func get(t *testing.T, c *http.Client, url string) answer {
	t.Helper()
	a, err := do(t, c, http.MethodGet, url, "")
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return a
}

func TestStatusRoutes(t *testing.T) {
	s, c := start(t)
	tests := []struct {
		path string
		want answer
	}{
		{"/s/503", answer{Status: 503, Body: "Service Unavailable\n"}},
		{"/s/200?size=5", answer{Status: 200, Body: "xxxxx"}},
		{"/s/429?retry-after=1.5", answer{Status: 429, Body: "Too Many Requests\n", RetryAfter: "1.5"}},
		{"/s/503?retry-after=soon", answer{Status: 503, Body: "Service Unavailable\n", RetryAfter: "soon"}},
		{"/s/503?retry-after=-1", answer{Status: 503, Body: "Service Unavailable\n", RetryAfter: "-1"}},
		{"/s/99", answer{Status: 400, Body: "faultserver: bad status code \"99\"\n"}},
		{"/s/503?size=-1", answer{Status: 400, Body: "faultserver: bad size \"-1\"\n"}},
		{"/nowhere", answer{Status: 404, Body: "404 page not found\n"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, get(t, c, s.URL()+tt.path)); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
		}
	}
}

func TestHintHeadersAndEndpoints(t *testing.T) {
	s, c := start(t)
	resp, err := c.Get(s.URL() + "/payments/s503?header=" + url.QueryEscape(`RateLimit:"default";r=0;t=1`) + "&ratelimit-reset-in=60s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reset, _ := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64)
	if resp.StatusCode != 503 || resp.Header.Get("Ratelimit") != `"default";r=0;t=1` || resp.Header.Get("X-Ratelimit-Remaining") != "0" ||
		time.Until(time.Unix(reset, 0)) < 58*time.Second || time.Until(time.Unix(reset, 0)) > 61*time.Second {
		t.Errorf("status %d, header %v", resp.StatusCode, resp.Header)
	}
	if a := get(t, c, s.URL()+"/s/503?header=nocolon"); a.Status != 400 {
		t.Errorf("bad header parameter: status %d, want 400", a.Status)
	}
	if a := get(t, c, s.URL()+"/search/s200"); a.Status != 200 {
		t.Errorf("/search/s200: status %d", a.Status)
	}
}

func TestRetryAfterDates(t *testing.T) {
	s, c := start(t)
	for _, form := range []string{"", "imf", "rfc850", "asctime"} {
		for _, in := range []time.Duration{30 * time.Second, -time.Hour} {
			before := time.Now().Add(in).Truncate(time.Second)
			a := get(t, c, s.URL()+"/s/503?retry-after-in="+in.String()+"&retry-after-form="+form)
			after := time.Now().Add(in)
			got, err := http.ParseTime(a.RetryAfter)
			if err != nil {
				t.Errorf("form %q: Retry-After %q is not an HTTP-date: %v", form, a.RetryAfter, err)
				continue
			}
			if got.Before(before) || got.After(after) {
				t.Errorf("form %q, in %v: Retry-After %v outside [%v, %v]", form, in, got, before, after)
			}
		}
	}
	if a := get(t, c, s.URL()+"/s/503?retry-after-in=1s&retry-after-form=unix"); a.Status != 400 {
		t.Errorf("unknown form: status %d, want 400", a.Status)
	}
}

func TestFailCountsPerKey(t *testing.T) {
	s, c := start(t)
	var got []int
	for _, key := range []string{"a", "a", "b", "a", "a", "b", "b"} {
		got = append(got, get(t, c, s.URL()+"/fail/2/503?retry-after=0&key="+key).Status)
	}
	if diff := cmp.Diff([]int{503, 503, 503, 200, 200, 503, 200}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if a := get(t, c, s.URL()+"/fail/0/503"); a.Status != 200 || a.RetryAfter != "" {
		t.Errorf("/fail/0/503: %+v, want 200 without Retry-After", a)
	}
	if a := get(t, c, s.URL()+"/fail/0/503?then=302&to=/echo"); a.Status != 302 || a.Location != "/echo" {
		t.Errorf("/fail/0/503?then=302: %+v, want 302 to /echo", a)
	}
	if got := s.Stats("/fail", "a"); got != (faultserver.Stats{Requests: 4}) {
		t.Errorf("Stats(/fail, a) = %+v", got)
	}
}

func TestAbort(t *testing.T) {
	s, c := start(t)
	if _, err := do(t, c, http.MethodPost, s.URL()+"/abort?key=k", "0123456789"); err == nil {
		t.Error("POST /abort: no error")
	}
	_, err := do(t, c, http.MethodGet, s.URL()+"/abort?reset=1&key=k", "")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("GET /abort?reset=1: error %v, want ECONNRESET", err)
	}
	if got := s.Stats("/abort", "k"); got != (faultserver.Stats{Requests: 2, Processed: 1}) {
		t.Errorf("Stats(/abort, k) = %+v", got)
	}
	want := []faultserver.Entry{
		{Seq: 1, Method: "POST", Path: "/abort", Route: "/abort", Key: "k", BodyBytes: 10, BodySum: sha("0123456789")},
		{Seq: 2, Method: "GET", Path: "/abort", Route: "/abort", Key: "k"},
	}
	if diff := cmp.Diff(want, s.Log()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestOrdersCountsProcessedPosts(t *testing.T) {
	s, c := start(t)
	for _, m := range []string{"POST", "POST", "GET"} {
		a, err := do(t, c, m, s.URL()+"/orders?key=o", "item")
		if err != nil || a.Status != 503 {
			t.Fatalf("%s /orders: %+v, %v; want 503", m, a, err)
		}
	}
	if got := s.Stats("/orders", "o"); got != (faultserver.Stats{Requests: 3, Processed: 2}) {
		t.Errorf("Stats(/orders, o) = %+v", got)
	}
}

func TestLoginThenMe(t *testing.T) {
	s, c := start(t)
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	var got []answer
	for _, p := range []string{"/login", "/login", "/me"} {
		a, err := do(t, c, http.MethodPost, s.URL()+p, "")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	want := []answer{
		{Status: 503, Body: "Service Unavailable\n"},
		{Status: 200, Body: "OK\n"},
		{Status: 200, Body: "lb=node-2; session=abc"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if got := s.Log()[2].Cookie; got != "lb=node-2; session=abc" {
		t.Errorf("logged Cookie = %q", got)
	}
}

func TestWriteDeduplicatesByIdempotencyKey(t *testing.T) {
	s, c := start(t)
	send := func(key, idem string) error {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/write?drop=1&key="+key, strings.NewReader("pay 10"))
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// With a key: dropped after processing, then answered from the record.
	if err := send("keyed", "k1"); err == nil {
		t.Error("first keyed POST: no error, want a dropped connection")
	}
	if err := send("keyed", "k1"); err != nil {
		t.Errorf("second keyed POST: %v", err)
	}
	// Without a key, "outcome unknown" resends are new writes.
	if err := send("plain", ""); err == nil {
		t.Error("first plain POST: no error")
	}
	if err := send("plain", ""); err != nil {
		t.Errorf("second plain POST: %v", err)
	}
	for key, want := range map[string]faultserver.Stats{"keyed": {2, 1}, "plain": {2, 2}} {
		if got := s.Stats("/write", key); got != want {
			t.Errorf("Stats(/write, %s) = %+v, want %+v", key, got, want)
		}
	}
	if got, want := s.Log()[1].IdempotencyKey, "k1"; got != want {
		t.Errorf("logged Idempotency-Key = %q, want %q", got, want)
	}
}

// The slow routes wait for the client to give up; they never depend on how
// long the wait takes.
func TestSlowRoutes(t *testing.T) {
	s, c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/slow/headers?delay=1h", nil)
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow headers: error %v, want deadline exceeded", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/slow/body?delay=1h&size=10", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("slow body: headers: %v", err)
	}
	half := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, half); err != nil || string(half) != "xxxxx" {
		t.Fatalf("slow body: first half %q, %v", half, err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("slow body: rest: %v, want canceled while the server waits", err)
	}
	resp.Body.Close()

	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/stall/2", nil)
		if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stall, request %d: error %v, want deadline exceeded", i+1, err)
		}
		cancel()
	}
	if a := get(t, c, s.URL()+"/stall/2"); a.Status != 200 {
		t.Errorf("stall, third request: %+v, want 200", a)
	}

	if a := get(t, c, s.URL()+"/slow/headers?delay=1ms&code=504&retry-after=2"); a != (answer{Status: 504, Body: "Gateway Timeout\n", RetryAfter: "2"}) {
		t.Errorf("short slow headers: %+v", a)
	}
	if a := get(t, c, s.URL()+"/slow/body?delay=1ms&size=4"); a != (answer{Status: 200, Body: "xxxx"}) {
		t.Errorf("short slow body: %+v", a)
	}
}

// /truncated promises 1000 bytes, sends 500 and closes: with reset=1 the
// read fails with a reset, otherwise at the unexpected end.
func TestTruncated(t *testing.T) {
	s, c := start(t)
	for _, tt := range []struct {
		query string
		want  func(error) bool
	}{
		{"", func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"?reset=1", func(err error) bool { return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) }},
	} {
		resp, err := c.Get(s.URL() + "/truncated" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ContentLength != 1000 || len(body) != 500 || !tt.want(err) {
			t.Errorf("%s: promised %d, read %d bytes, then %v", tt.query, resp.ContentLength, len(body), err)
		}
	}
}

func TestRedirectLocations(t *testing.T) {
	s, c := start(t)
	local := s.LocalhostURL()
	tests := []struct {
		url, want string
	}{
		{s.URL() + "/redirect/302/2", "/redirect/302/1"},
		{s.URL() + "/redirect/301/2?key=q", "/redirect/301/1?key=q"},
		{s.URL() + "/redirect/307/2?rel=1", "1?rel=1"},
		{s.URL() + "/redirect/307/12?rel=1&note=a/b", "11?rel=1&note=a/b"},
		{s.URL() + "/redirect/308/2?abs=1", s.URL() + "/redirect/308/1?abs=1"},
		{s.URL() + "/redirect/303/2?cross=1", local + "/redirect/303/1?cross=1"},
		{local + "/redirect/303/2?cross=1", s.URL() + "/redirect/303/1?cross=1"},
		{s.URL() + "/redirect/302/1?to=ftp://example.test/x", "ftp://example.test/x"},
		{s.URL() + "/redirect/302/loop?key=l", "/redirect/302/loop?key=l"},
	}
	for _, tt := range tests {
		a := get(t, c, tt.url)
		if a.Location != tt.want {
			t.Errorf("GET %s: Location %q, want %q", tt.url, a.Location, tt.want)
		}
	}
	if a := get(t, c, s.URL()+"/redirect/200/1"); a.Status != 400 {
		t.Errorf("non-3xx redirect: status %d, want 400", a.Status)
	}
}

// A following client ends the chain at the echo, which shows what the last
// hop received.
func TestRedirectChainEndsInEcho(t *testing.T) {
	s, c := start(t)
	c.CheckRedirect = nil
	tests := []struct {
		method, path string
		want         faultserver.Echo
	}{
		{"POST", "/redirect/303/3?cross=1", faultserver.Echo{Method: "GET", Path: "/redirect/303/0", Query: "cross=1"}},
		{"POST", "/redirect/307/2?rel=1", faultserver.Echo{Method: "POST", Path: "/redirect/307/0", Query: "rel=1", BodyBytes: 4}},
	}
	for _, tt := range tests {
		a, err := do(t, c, tt.method, s.URL()+tt.path, "body")
		if err != nil {
			t.Fatal(err)
		}
		var got faultserver.Echo
		if err := json.Unmarshal([]byte(a.Body), &got); err != nil {
			t.Fatalf("%s %s: %v in %q", tt.method, tt.path, err, a.Body)
		}
		got.Header, got.Host = nil, ""
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s: echo (-want +got):\n%s", tt.method, tt.path, diff)
		}
	}
}

func TestLogEntry(t *testing.T) {
	s, c := start(t)
	req, _ := http.NewRequest(http.MethodPut, s.URL()+"/s/201?key=e", bytes.NewReader([]byte("abc")))
	req.Header.Set("Cookie", "a=1")
	req.Header.Set("Idempotency-Key", "i-1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []faultserver.Entry{{Seq: 1, Method: "PUT", Path: "/s/201", Route: "/s", Key: "e", Cookie: "a=1", IdempotencyKey: "i-1", Status: 201, BodyBytes: 3, BodySum: sha("abc")}}
	if diff := cmp.Diff(want, s.Log()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// Close ends waits in progress and the connections the client keeps, and
// leaves no goroutine behind (TestMain checks with goleak).
func TestCloseWithRequestsInFlight(t *testing.T) {
	s, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	idle, busy := &http.Transport{}, &http.Transport{}
	defer idle.CloseIdleConnections()
	defer busy.CloseIdleConnections()

	get(t, &http.Client{Transport: idle}, s.URL()+"/s/200") // leaves a keep-alive connection
	c := &http.Client{Transport: busy}
	done := make(chan error)
	go func() {
		_, err := c.Get(s.URL() + "/slow/headers?delay=1h")
		done <- err
	}()
	for spin := time.Now(); s.Stats("/slow/headers", "").Requests == 0; runtime.Gosched() {
		if time.Since(spin) > time.Minute {
			t.Fatal("the request never reached the server")
		}
	}
	if got := s.OpenConns(); got != 2 {
		t.Errorf("OpenConns() = %d, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("request in flight during Close: no error")
	}
	if got := s.OpenConns(); got != 0 {
		t.Errorf("OpenConns() after Close = %d", got)
	}
	if got := s.Accepted(); got != 2 {
		t.Errorf("Accepted() after Close = %d, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A client that gives up may leave the server still reading its request:
// WaitIdle waits for the server to finish before the log is read.
func TestWaitIdle(t *testing.T) {
	s, c := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the request is written, but the client stops waiting at once
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/slow/headers?delay=1h&key=w", nil)
	c.Do(req)
	if err := s.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.Log() {
		if e.Status != 0 {
			t.Errorf("entry %+v: a dropped request has no status", e)
		}
	}

	// A connection that never sends keeps the server busy: WaitIdle gives
	// up with the context.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for spin := time.Now(); s.OpenConns() == 0; runtime.Gosched() {
		if time.Since(spin) > time.Minute {
			t.Fatal("the connection never reached the server")
		}
	}
	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.WaitIdle(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitIdle with a silent connection open: %v, want the context's deadline", err)
	}
}

func TestFailParametersAreCheckedFirst(t *testing.T) {
	s, c := start(t)
	if a := get(t, c, s.URL()+"/fail/1/503?retry-after-in=x&key=p"); a.Status != 400 {
		t.Fatalf("bad parameter: status %d", a.Status)
	}
	if a := get(t, c, s.URL()+"/fail/1/503?key=p"); a.Status != 503 {
		t.Errorf("after a rejected request: status %d, want the first failure, 503", a.Status)
	}
}

func TestAuth(t *testing.T) {
	s, c := start(t)
	for _, tt := range []struct {
		header string
		want   answer
	}{
		{"", answer{Status: 401, Body: "Unauthorized\n"}},
		{"Bearer old", answer{Status: 401, Body: "Unauthorized\n"}},
		{"Bearer new", answer{Status: 200, Body: "new"}},
	} {
		req, _ := http.NewRequest("GET", s.URL()+"/auth", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := (answer{Status: resp.StatusCode, Body: string(b)}); got != tt.want {
			t.Errorf("Authorization %q: %+v, want %+v", tt.header, got, tt.want)
		}
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
