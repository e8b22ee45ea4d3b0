package retrystack_test

// The entry points and their defaults, as an SDK, a proxy or an
// application meets them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	rscookies "github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
)

// flakyRedirects answers /start with a 302 to /end that sets a cookie, and
// fails every first request to a path with a 503.
func flakyRedirects(t *testing.T, seen *recorder) *httptest.Server {
	t.Helper()
	var first = map[string]*atomic.Bool{"/start": {}, "/end": {}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + " " + r.Header.Get("Cookie"))
		if f, ok := first[r.URL.Path]; ok && !f.Swap(true) {
			w.WriteHeader(503)
			return
		}
		if r.URL.Path == "/start" {
			http.SetCookie(w, &http.Cookie{Name: "hop", Value: "1"})
			http.Redirect(w, r, "/end", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// NewTransport retries and nothing else: the http.Client above follows the
// redirect and runs its own Jar per hop, each hop retried on its own.
func TestNewTransportUnderAClient(t *testing.T) {
	var seen recorder
	srv := flakyRedirects(t, &seen)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: fastPolicy(), Transport: base})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rt); got != "retry → transport" {
		t.Errorf("NewTransport is %q", got)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: rt, Jar: jar}
	resp, err := c.Get(srv.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []string{"/start ", "/start ", "/end hop=1", "/end hop=1"}
	if diff := cmp.Diff(want, seen.get()); diff != "" {
		t.Errorf("what the server saw (-want +got):\n%s", diff)
	}
	if rep := engine.ReportOf(resp); rep == nil || len(rep.Attempts) != 2 {
		t.Errorf("last hop's report %v", rep)
	}
	// The transport itself returns a 3xx as it is, as an SDK expects.
	req, _ := http.NewRequest("GET", srv.URL+"/start", nil)
	resp, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("RoundTrip followed the redirect: %d", resp.StatusCode)
	}
}

// Settings an entry point cannot honour are a *ConfigError, not ignored.
func TestEntryPointsRefuseWhatTheyIgnore(t *testing.T) {
	for name, build := range map[string]func() error{
		"NewTransport with cookies": func() error {
			_, err := retrystack.NewTransport(retrystack.Config{Cookies: rscookies.Config{Jar: rscookies.NewJar()}})
			return err
		},
		"NewTransport with a redirect policy": func() error {
			_, err := retrystack.NewTransport(retrystack.Config{Redirect: redirect.Config{MaxHops: 3}})
			return err
		},
		"NewStack with a transport": func() error {
			_, err := retrystack.NewStack(retrystack.Config{Transport: &http.Transport{}})
			return err
		},
	} {
		var ce *policy.ConfigError
		if err := build(); !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a *policy.ConfigError", name, err)
		}
	}
}

// The returned client's CheckRedirect and Jar are not the stack's policy:
// changing them makes requests fail with a *ConfigError saying where the
// setting goes, and Config.Redirect.Check is the policy that takes effect.
func TestNewClientRedirectPolicy(t *testing.T) {
	var seen recorder
	srv := flakyRedirects(t, &seen)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var checked []string
	c, err := retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: tr, Redirect: redirect.Config{
		Check: func(next *http.Request, via []*http.Request) error {
			checked = append(checked, next.URL.Path)
			return http.ErrUseLastResponse
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || fmt.Sprint(checked) != "[/end]" {
		t.Errorf("status %d, checked %v: the stack's redirect policy was not the one applied", resp.StatusCode, checked)
	}

	jar, _ := cookiejar.New(nil)
	for name, change := range map[string]func(*http.Client){
		"CheckRedirect":     func(c *http.Client) { c.CheckRedirect = func(*http.Request, []*http.Request) error { return nil } },
		"nil CheckRedirect": func(c *http.Client) { c.CheckRedirect = nil },
		"Jar":               func(c *http.Client) { c.Jar = jar },
	} {
		c, err := retrystack.NewClient(retrystack.Config{Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest("POST", srv.URL+"/start", body)
		_, err = c.Do(req)
		var ce *policy.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s changed: %v, want a *policy.ConfigError", name, err)
		}
		if !body.closed.Load() {
			t.Errorf("%s changed: request body left open", name)
		}
	}
}

type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

// The zero Config keeps no cookies: what one caller's server sets is never
// sent for another.
func TestZeroConfigKeepsNoCookies(t *testing.T) {
	var seen recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("Cookie"))
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "alice"})
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if diff := cmp.Diff([]string{"", ""}, seen.get()); diff != "" {
		t.Errorf("Cookie headers sent (-want +got):\n%s", diff)
	}
}

// Prepare and RefreshAuth reach the engine through retrystack.Config.
func TestConfigReachesTheEngine(t *testing.T) {
	var seen recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	token := "stale"
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Transport: tr,
		Prepare: func(req *http.Request, _ int) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		},
		RefreshAuth: func(context.Context, *http.Response) error { token = "fresh"; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]string{"Bearer stale", "Bearer fresh"}, seen.get()); diff != "" || resp.StatusCode != 200 {
		t.Errorf("status %d; Authorization sent (-want +got):\n%s", resp.StatusCode, diff)
	}
}

// http.Client.Timeout over the stack: when net/http's timer fires first it
// replaces the stack's error with its own, so ReportFrom may find nothing;
// the error is a timeout either way and the report always reaches OnGiveUp.
// Policy.Timeout is the knob that keeps the report in the error.
func TestClientTimeoutAndTheReport(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	var gaveUp atomic.Pointer[engine.Report]
	c, err := retrystack.NewClient(retrystack.Config{Policy: fastPolicy(), Transport: tr,
		Hooks: engine.Hooks{OnGiveUp: func(r *engine.Report) { gaveUp.Store(r) }}})
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = 50 * time.Millisecond
	_, err = c.Get(srv.URL)
	// Two clocks end at the same instant: net/http's timer (its error says
	// "Client.Timeout exceeded") and the context deadline it set (the
	// stack's *engine.Error comes back, inside net/http's *url.Error).
	// Either way the caller must see a timeout.
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v: want a net.Error whose Timeout() is true", err)
	}
	if rep := engine.ReportFrom(err); rep != nil && rep.Stop != policy.StopDeadline {
		t.Errorf("ReportFrom(%v).Stop = %s, want deadline", err, rep.Stop)
	}
	if rep := gaveUp.Load(); rep == nil || rep.Stop != policy.StopDeadline {
		t.Errorf("OnGiveUp got %v, want the report with stop deadline", rep)
	}

	p := fastPolicy()
	p.Timeout = 50 * time.Millisecond
	c, err = retrystack.NewClient(retrystack.Config{Policy: p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(srv.URL)
	if rep := engine.ReportFrom(err); rep == nil || rep.Stop != policy.StopDeadline {
		t.Errorf("Policy.Timeout: ReportFrom(%v) = %v, want the report with stop deadline", err, rep)
	}
}
