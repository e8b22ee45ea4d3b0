package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
)

// proxy is an httputil.ReverseProxy to backend over NewTransport.
func proxy(t *testing.T, backend *httptest.Server, cfg retrystack.Config) *httptest.Server {
	t.Helper()
	rt, err := retrystack.NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(backend.URL)
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport: rt,
		ErrorLog:  nil,
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv
}

// Server-sent events reach the client through the proxy as they are
// produced: the backend sends the second event only after the client has
// read the first.
func TestProxyStreamsServerSentEvents(t *testing.T) {
	read := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	}))
	defer backend.Close()
	front := proxy(t, backend, retrystack.Config{Policy: fast(), Transport: transport(t)})
	resp, err := (&http.Client{Transport: transport(t)}).Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var events []string
	for line, err := br.ReadString('\n'); err == nil; line, err = br.ReadString('\n') {
		if after, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(after))
			if len(events) == 1 {
				close(read) // only now may the backend go on: nothing was buffered
			}
		}
	}
	if fmt.Sprint(events) != "[one two]" {
		t.Errorf("events %v", events)
	}
}

// A WebSocket upgrade is proxied: the 101's body passes the stack as the
// connection, which ReverseProxy needs to splice the two sides.
func TestProxyUpgrades(t *testing.T) {
	front := proxy(t, echoServer(t), retrystack.Config{Policy: fast(), Transport: transport(t)})
	echoOnce(t, context.Background(), "ws"+strings.TrimPrefix(front.URL, "http"), &http.Client{Transport: transport(t)})
}

// A proxied PUT carries the client's streaming body, which has no
// GetBody: the stack keeps it as it is sent and replays it, whole, on each
// retry; past the replay limit it is sent once, and the 503 goes back.
func TestProxyReplaysAStreamedBodyWithinItsLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int64
		sends int32
	}{{"within the limit", 0, 3}, {"past the limit", 4, 1}} {
		t.Run(c.name, func(t *testing.T) {
			var puts atomic.Int32
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if string(b) != "content" {
					t.Errorf("the backend received %q", b)
				}
				puts.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer backend.Close()
			front := proxy(t, backend, retrystack.Config{Policy: fast(), Transport: transport(t), ReplayLimit: c.limit})
			req, _ := http.NewRequest(http.MethodPut, front.URL+"/doc", strings.NewReader("content"))
			resp, err := (&http.Client{Transport: transport(t)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || puts.Load() != c.sends {
				t.Errorf("status %d after %d sends, want 503 after %d", resp.StatusCode, puts.Load(), c.sends)
			}
		})
	}
}

// One user's cookies never reach another: the stack behind a proxy keeps
// none (the zero Config stores no cookies).
func TestProxySharesNoCookies(t *testing.T) {
	var seen log
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + " " + r.Header.Get("Cookie"))
		if r.URL.Path == "/login" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "alice"})
		}
	}))
	defer backend.Close()
	front := proxy(t, backend, retrystack.Config{Policy: fast(), Transport: transport(t)})
	for _, path := range []string{"/login", "/whoami"} { // alice logs in; bob, with no cookie, asks
		resp, err := (&http.Client{Transport: transport(t)}).Get(front.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if diff := cmp.Diff([]string{"/login ", "/whoami "}, seen.get()); diff != "" {
		t.Errorf("what the backend saw (-want +got):\n%s", diff)
	}
}
