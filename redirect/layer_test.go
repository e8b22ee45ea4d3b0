package redirect_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/redirect"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) { rttest.Contract(t, redirect.Layer(redirect.Config{}).Wrap) }

// setup returns a fault server and a client whose only layer is the
// redirect layer built from cfg.
func setup(t *testing.T, cfg redirect.Config) (*faultserver.Server, *http.Client) {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := middleware.NewStack(redirect.Layer(cfg))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: s.Then(tr), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	return srv, c
}

type hop struct {
	Method string
	Path   string
	Body   int64
}

func hops(srv *faultserver.Server, key string) []hop {
	var out []hop
	for _, e := range srv.Log() {
		if e.Key == key {
			out = append(out, hop{e.Method, e.Path, e.BodyBytes})
		}
	}
	return out
}

func TestMethodAndBodyRules(t *testing.T) {
	srv, c := setup(t, redirect.Config{})
	tests := []struct {
		name, method, path string
		stream             bool
		wantStatus         int
		want               []hop
	}{
		{"301 POST becomes GET", "POST", "/redirect/301/1", false, 200,
			[]hop{{"POST", "/redirect/301/1", 4}, {"GET", "/redirect/301/0", 0}}},
		{"302 POST becomes GET", "POST", "/redirect/302/1", false, 200,
			[]hop{{"POST", "/redirect/302/1", 4}, {"GET", "/redirect/302/0", 0}}},
		{"302 PUT becomes GET", "PUT", "/redirect/302/1", false, 200,
			[]hop{{"PUT", "/redirect/302/1", 4}, {"GET", "/redirect/302/0", 0}}},
		{"301 DELETE becomes GET", "DELETE", "/redirect/301/1", false, 200,
			[]hop{{"DELETE", "/redirect/301/1", 4}, {"GET", "/redirect/301/0", 0}}},
		{"303 PATCH becomes GET", "PATCH", "/redirect/303/1", false, 200,
			[]hop{{"PATCH", "/redirect/303/1", 4}, {"GET", "/redirect/303/0", 0}}},
		{"303 POST becomes GET", "POST", "/redirect/303/1", false, 200,
			[]hop{{"POST", "/redirect/303/1", 4}, {"GET", "/redirect/303/0", 0}}},
		{"303 HEAD stays HEAD", "HEAD", "/redirect/303/1", false, 200,
			[]hop{{"HEAD", "/redirect/303/1", 0}, {"HEAD", "/redirect/303/0", 0}}},
		{"307 replays the body", "POST", "/redirect/307/2", false, 200,
			[]hop{{"POST", "/redirect/307/2", 4}, {"POST", "/redirect/307/1", 4}, {"POST", "/redirect/307/0", 4}}},
		{"308 replays the body", "PUT", "/redirect/308/1", false, 200,
			[]hop{{"PUT", "/redirect/308/1", 4}, {"PUT", "/redirect/308/0", 4}}},
		{"307 without GetBody is returned as is", "POST", "/redirect/307/1", true, 307,
			[]hop{{"POST", "/redirect/307/1", 4}}},
		{"relative Location", "GET", "/redirect/302/2?rel=1", false, 200,
			[]hop{{"GET", "/redirect/302/2", 0}, {"GET", "/redirect/302/1", 0}, {"GET", "/redirect/302/0", 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.ReplaceAll(tt.name, " ", "-")
			var body io.Reader = bytes.NewReader([]byte("data"))
			if tt.stream {
				body = io.NopCloser(body)
			}
			if tt.method == "GET" || tt.method == "HEAD" {
				body = nil
			}
			sep := "?"
			if strings.Contains(tt.path, "?") {
				sep = "&"
			}
			req, _ := http.NewRequest(tt.method, srv.URL()+tt.path+sep+"key="+key, body)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.want, hops(srv, key)); diff != "" {
				t.Errorf("hops (-want +got):\n%s", diff)
			}
		})
	}
}

func credentialed(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "Cookie", "Proxy-Authorization", "Www-Authenticate"} {
		req.Header.Set(h, "secret")
	}
	req.Header.Set("X-Kept", "yes")
	return req
}

func echoed(t *testing.T, c *http.Client, req *http.Request) faultserver.Echo {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e faultserver.Echo
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return e
}

func TestCredentialsAcrossOrigins(t *testing.T) {
	srv, c := setup(t, redirect.Config{})
	same := echoed(t, c, credentialed(t, srv.URL()+"/redirect/302/2"))
	if same.Header.Get("Authorization") != "secret" || same.Header.Get("Cookie") != "secret" {
		t.Errorf("same origin: credentials dropped: %v", same.Header)
	}
	// 127.0.0.1 → localhost → 127.0.0.1: dropped at the first hop, and they
	// stay dropped when the chain comes back.
	cross := echoed(t, c, credentialed(t, srv.URL()+"/redirect/302/2?cross=1"))
	for _, h := range []string{"Authorization", "Cookie", "Proxy-Authorization", "Www-Authenticate"} {
		if v := cross.Header.Get(h); v != "" {
			t.Errorf("cross origin: %s = %q reached the last hop", h, v)
		}
	}
	if cross.Header.Get("X-Kept") != "yes" {
		t.Errorf("cross origin: other headers dropped too: %v", cross.Header)
	}
}

// https → http is a hop to another origin: credentials are not sent in the
// clear.
func TestHTTPSDowngradeDropsCredentials(t *testing.T) {
	plain, _ := setup(t, redirect.Config{})
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL()+"/echo", http.StatusFound)
	}))
	defer tlsSrv.Close()
	s, _ := middleware.NewStack(redirect.Layer(redirect.Config{}))
	tr := tlsSrv.Client().Transport.(*http.Transport)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	e := echoed(t, c, credentialed(t, tlsSrv.URL))
	if v := e.Header.Get("Authorization"); v != "" {
		t.Errorf("https → http: Authorization %q sent in the clear", v)
	}
}

func TestLimitsAndBadLocations(t *testing.T) {
	srv, c := setup(t, redirect.Config{})
	get := func(path string) error {
		resp, err := c.Get(srv.URL() + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("/redirect/302/10?key=ten"); err != nil {
		t.Errorf("10 hops: %v", err)
	}
	var tooMany *redirect.TooManyHopsError
	if err := get("/redirect/302/11?key=eleven"); !errors.As(err, &tooMany) || tooMany.Max != 10 {
		t.Errorf("11 hops: %v, want a *TooManyHopsError", err)
	}
	if err := get("/redirect/301/loop?key=loop"); !errors.As(err, &tooMany) {
		t.Errorf("loop: %v, want a *TooManyHopsError", err)
	}
	if n := len(hops(srv, "loop")); n != 11 {
		t.Errorf("loop: the server saw %d requests, want 11", n)
	}
	var bad *redirect.LocationError
	if err := get("/redirect/302/1?to=ftp://example.test/x"); !errors.As(err, &bad) || bad.Reason != "not http or https" {
		t.Errorf("ftp Location: %v, want a *LocationError", err)
	}
	if err := get("/redirect/302/1?to=http://%5B::1"); !errors.As(err, &bad) || bad.Err == nil {
		t.Errorf("unparsable Location: %v, want a *LocationError with its cause", err)
	}

	_, err := middleware.NewStack(redirect.Layer(redirect.Config{MaxHops: -1}))
	var invalid *middleware.LayerError
	if !errors.As(err, &invalid) {
		t.Errorf("MaxHops -1: %v, want an *LayerError", err)
	}
}

func TestCheck(t *testing.T) {
	errStop := errors.New("no further")
	var seen []string
	srv, c := setup(t, redirect.Config{Check: func(next *http.Request, via []*http.Request) error {
		seen = append(seen, next.URL.Path)
		switch len(via) {
		case 1:
			return nil
		case 2:
			return http.ErrUseLastResponse
		}
		return errStop
	}})
	resp, err := c.Get(srv.URL() + "/redirect/302/3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 302 || resp.Request.URL.Path != "/redirect/302/2" {
		t.Errorf("ErrUseLastResponse: %d from %s, want the 302 of the second hop", resp.StatusCode, resp.Request.URL.Path)
	}
	if diff := cmp.Diff([]string{"/redirect/302/2", "/redirect/302/1"}, seen); diff != "" {
		t.Errorf("Check saw (-want +got):\n%s", diff)
	}
}

// Every hop's send is counted in the stack's one operation: a layer below
// the redirect layer sees the sends before it grow 0, 1, 2.
func TestSendsNumberedAcrossHops(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var got []int
	resends := middleware.Layer{Name: "resends", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			got = append(got, func() int { op, _ := middleware.OperationOf(req.Context()); return op.Sends() }())
			return next.RoundTrip(req)
		})
	}}
	s, err := middleware.NewStack(redirect.Layer(redirect.Config{}), resends)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Then(tr).RoundTrip(mustGet(t, srv.URL()+"/redirect/302/2"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]int{0, 1, 2}, got); diff != "" {
		t.Errorf("sends before each hop (-want +got):\n%s", diff)
	}
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A custom Host survives a hop to the same host, relative or absolute, as
// net/http keeps it (golang.org/issue/22233); a hop to another host drops
// it.
func TestHostSurvivesSameHostRedirect(t *testing.T) {
	var other *httptest.Server
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Host)
		mu.Unlock()
		switch r.URL.Path {
		case "/relative":
			http.Redirect(w, r, "/end", http.StatusFound)
		case "/absolute":
			http.Redirect(w, r, "http://"+r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()+"/end", http.StatusFound)
		case "/cross":
			http.Redirect(w, r, other.URL+"/end", http.StatusFound)
		}
	}))
	defer srv.Close()
	other = httptest.NewServer(srv.Config.Handler) // the same handler on another host

	defer other.Close()
	bare := strings.TrimPrefix(other.URL, "http://")
	for _, tt := range []struct {
		path, want string
	}{
		{"/relative", "/end virtual.test"},
		{"/absolute", "/end virtual.test"},
		{"/cross", "/end " + bare},
	} {
		s, err := middleware.NewStack(redirect.Layer(redirect.Config{}))
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{}
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		req.Host = "virtual.test"
		mu.Lock()
		seen = nil
		mu.Unlock()
		resp, err := s.Then(tr).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		mu.Lock()
		if got := seen[len(seen)-1]; got != tt.want {
			t.Errorf("%s: last hop saw %q, want %q", tt.path, got, tt.want)
		}
		mu.Unlock()
	}
}
