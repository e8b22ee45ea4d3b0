package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/rttest"
	"github.com/retrystack/retrystack/middleware"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStockLayersObeyContract(t *testing.T) {
	layers := []middleware.Layer{
		middleware.ErrorForStatus(0),
		middleware.Header(http.Header{"X-A": {"1"}}),
		middleware.HeaderFunc(func(*http.Request) (http.Header, error) { return nil, errors.New("no token") }),
		middleware.Timeout(time.Minute),
	}
	for _, l := range layers {
		t.Run(l.Name, func(t *testing.T) { rttest.Contract(t, l.Wrap) })
	}
}

// newClient returns a client over a fresh transport to srv, built from the
// given layers, and closes everything when the test ends.
func newClient(t *testing.T, srv *httptest.Server, layers ...middleware.Layer) *http.Client {
	t.Helper()
	s, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: s.Then(tr)}
	t.Cleanup(func() {
		c.CloseIdleConnections()
		srv.Close()
	})
	return c
}

func TestErrorForStatus(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, "fine")
		case "/moved":
			w.Header().Set("Location", "/ok")
			w.WriteHeader(http.StatusFound)
		case "/busy":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "try later")
		case "/big":
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, big)
		}
	}))
	c := newClient(t, srv, middleware.ErrorForStatus(0))
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	for _, path := range []string{"/ok", "/moved"} {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
	}

	tests := []struct {
		path       string
		want       *middleware.StatusError
		retryAfter string
	}{
		{"/busy", &middleware.StatusError{StatusCode: 503, Status: "503 Service Unavailable", Body: []byte("try later")}, "3"},
		{"/big", &middleware.StatusError{StatusCode: 502, Status: "502 Bad Gateway", Body: []byte(big[:4<<10]), Truncated: true}, ""},
	}
	for _, tt := range tests {
		resp, err := c.Get(srv.URL + tt.path)
		if resp != nil {
			t.Fatalf("GET %s: got a response with error %v", tt.path, err)
		}
		var se *middleware.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("GET %s: error %v is not a *StatusError", tt.path, err)
		}
		if got, want := se.Header.Get("Retry-After"), tt.retryAfter; got != want {
			t.Errorf("GET %s: Retry-After = %q, want %q", tt.path, got, want)
		}
		if se.Response == nil || se.Response.Body != http.NoBody || se.Response.Request == nil {
			t.Errorf("GET %s: StatusError.Response %+v, want the response with its request and an empty body", tt.path, se.Response)
		}
		se.Header, se.Response = nil, nil
		if diff := cmp.Diff(tt.want, se); diff != "" {
			t.Errorf("GET %s: StatusError (-want +got):\n%s", tt.path, diff)
		}
	}
}

func TestHeader(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Static")+"/"+r.Header.Get("X-Attempt"))
	}))
	n := 0
	attempt := middleware.HeaderFunc(func(*http.Request) (http.Header, error) {
		n++
		return http.Header{"X-Attempt": {fmt.Sprint(n)}}, nil
	})
	attempt.Name = "attempt"
	static := http.Header{"X-Static": {"s"}}
	c := newClient(t, srv, middleware.Header(static), attempt)
	static.Set("X-Static", "changed after construction")

	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Static", "caller")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if v := req.Header.Get("X-Static"); v != "caller" {
			t.Errorf("caller's header changed to %q", v)
		}
	}
	if diff := cmp.Diff([]string{"s/1", "s/2"}, got); diff != "" {
		t.Errorf("headers the server saw (-want +got):\n%s", diff)
	}
}

func TestHeaderFuncError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	errNoToken := errors.New("no token")
	c := newClient(t, srv, middleware.HeaderFunc(func(*http.Request) (http.Header, error) { return nil, errNoToken }))
	_, err := c.Post(srv.URL, "text/plain", bytes.NewReader([]byte("x")))
	if !errors.Is(err, errNoToken) {
		t.Errorf("error = %v, want one wrapping %v", err, errNoToken)
	}
}

// slowServer answers /headers only once the client gives up, and sends the
// headers of /body at once but its body only once the client gives up, so
// the tests never depend on how long anything takes.
func slowServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/headers":
			<-r.Context().Done()
		case "/body":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "12345")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/fast":
			io.WriteString(w, "done")
		}
	}))
}

// attemptLimit is generous: the tests wait for it to pass, so it only needs
// to exceed what a loaded machine takes to connect and send headers.
const attemptLimit = 200 * time.Millisecond

func TestTimeout(t *testing.T) {
	srv := slowServer()
	c := newClient(t, srv, middleware.Timeout(attemptLimit))

	_, err := c.Get(srv.URL + "/headers")
	assertAttemptTimeout(t, "slow headers", err)

	resp, err := c.Get(srv.URL + "/body")
	if err != nil {
		t.Fatalf("slow body: headers should arrive in time: %v", err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	assertAttemptTimeout(t, "slow body", err)
}

// A fast response is untouched by the layer, body included.
func TestTimeoutFast(t *testing.T) {
	srv := slowServer()
	c := newClient(t, srv, middleware.Timeout(time.Hour))
	resp, err := c.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "done" {
		t.Errorf("fast: body %q, err %v", b, err)
	}
}

// When the layer's deadline passed first, a read after the caller's own
// deadline has passed too is still the layer's timeout.
func TestTimeoutFirstDeadlineWins(t *testing.T) {
	srv := slowServer()
	c := newClient(t, srv, middleware.Timeout(attemptLimit))
	ctx, cancel := context.WithTimeout(context.Background(), 2*attemptLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/body", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("headers: %v", err)
	}
	defer resp.Body.Close()
	<-ctx.Done()
	_, err = io.ReadAll(resp.Body)
	assertAttemptTimeout(t, "late read", err)
}

func TestHeaderReplacesNonCanonicalKeys(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("X-Token")
	}))
	c := newClient(t, srv, middleware.Header(http.Header{"x-token": {"layer"}}))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("X-Token", "caller")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]string{"layer"}, got); diff != "" {
		t.Errorf("X-Token at the server (-want +got):\n%s", diff)
	}
}

func TestHeaderFuncNil(t *testing.T) {
	_, err := middleware.NewStack(middleware.HeaderFunc(nil))
	var ie *middleware.LayerError
	if !errors.As(err, &ie) || ie.Reason != "nil header function" {
		t.Errorf("NewStack(HeaderFunc(nil)) = %v, want an *LayerError", err)
	}
}

func assertAttemptTimeout(t *testing.T, what string, err error) {
	t.Helper()
	var te *middleware.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("%s: error %v is not a *TimeoutError", what, err)
	}
	if te.Limit != attemptLimit {
		t.Errorf("%s: Limit = %v", what, te.Limit)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: errors.Is(err, context.DeadlineExceeded) = false", what)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: not a net.Error with Timeout() true", what)
	}
}

// The caller's own cancellation is not the layer's timeout.
func TestTimeoutLeavesCallerCancellation(t *testing.T) {
	srv := slowServer()
	c := newClient(t, srv, middleware.Timeout(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/body", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	_, err = io.ReadAll(resp.Body)
	var te *middleware.TimeoutError
	if err == nil || errors.As(err, &te) {
		t.Errorf("read after the caller cancelled: error %v, want a plain cancellation", err)
	}
}
