package middleware_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStockLayersObeyContract(t *testing.T) {
	layers := []middleware.Layer{
		middleware.ErrorForStatus(0),
		staticHeader(http.Header{"X-A": {"1"}}),
		middleware.HeaderFunc(func(*http.Request) (http.Header, error) { return nil, errors.New("no token") }),
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
	c := newClient(t, srv, staticHeader(static), attempt)
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

func TestHeaderReplacesNonCanonicalKeys(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("X-Token")
	}))
	c := newClient(t, srv, staticHeader(http.Header{"x-token": {"layer"}}))
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

// staticHeader is the header layer setting h on every request.
func staticHeader(h http.Header) middleware.Layer {
	h = h.Clone()
	return middleware.HeaderFunc(func(*http.Request) (http.Header, error) { return h, nil })
}
