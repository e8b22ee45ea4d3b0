package retrystack_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	stdjar "net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	rjar "github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// The tests of this file are a hostile review's (issue 26's composition
// of cookies, signals and operations): each failed before its fix.

func quick() *policy.Policy {
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	return &p
}

// R1. docs/cross-layer.md: "A retry layer always replaces them too: a
// request that arrives carrying them (a proxy without Handler) leaves with
// this layer's values or none." With the default Signals (To nil) the
// caller's stale values reach the third party untouched.
func TestStaleSignalsNeverReachAThirdParty(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(fmt.Sprintf("attempt=%q timeout=%q", r.Header.Get("Retrystack-Attempt"), r.Header.Get("Retrystack-Timeout-Ms")))
	}))
	defer srv.Close()
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: quick()})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	// what a proxy (no crosslayer.Handler) forwards from its own caller
	req.Header.Set("Retrystack-Attempt", "3; max=3")
	req.Header.Set("Retrystack-Timeout-Ms", "5")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := got.Load().(string); s != `attempt="" timeout=""` {
		t.Errorf("the unnamed third party received %s; want no Retrystack-* header", s)
	}
}

// R2. Default cookie layer (DropDiscarded false: "nothing is lost") with
// FailOnExhausted: the last response's cookie is neither stored nor named.
func TestFailOnExhaustedKeepsOrNamesTheLastCookie(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: fmt.Sprintf("c%d", n.Add(1)), Value: "v"})
		w.WriteHeader(503)
	}))
	defer srv.Close()
	for _, under := range []string{"NewClient+cookie layer", "NewTransport+Client.Jar"} {
		t.Run(under, func(t *testing.T) {
			n.Store(0)
			var mu sync.Mutex
			var lost []string
			hooks := engine.Hooks{OnPitfall: func(ev engine.Event) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Pitfall == engine.PitfallCookieLost {
					lost = append(lost, ev.Cookies...)
				}
			}}
			cfg := retrystack.Config{Policy: quick(), FailOnExhausted: true, Hooks: hooks}
			var c *http.Client
			var jar http.CookieJar
			if under == "NewClient+cookie layer" {
				jar = rjar.NewJar()
				cfg.Cookies = rjar.Config{Jar: jar}
				var err error
				if c, err = retrystack.NewClient(cfg); err != nil {
					t.Fatal(err)
				}
			} else {
				jar, _ = stdjar.New(nil)
				rt, err := retrystack.NewTransport(cfg)
				if err != nil {
					t.Fatal(err)
				}
				c = &http.Client{Transport: rt, Jar: jar}
			}
			_, err := c.Get(srv.URL)
			if _, ok := errors.AsType[*engine.ExhaustedError](err); !ok {
				t.Fatalf("err %v, want ExhaustedError", err)
			}
			u, _ := url.Parse(srv.URL)
			var stored []string
			for _, ck := range jar.Cookies(u) {
				stored = append(stored, ck.Name)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(stored)+len(lost) != 3 {
				t.Errorf("3 responses set c1..c3: stored %v, named lost %v; c3 vanished without a trace", stored, lost)
			}
		})
	}
}

// R3. NewTransport under an http.Client with a Jar, Prepare failing over to
// a mirror on another host: the mirror's cookie (set by a discarded 503) is
// carried onto the final response and stored by the Client's jar for the
// caller's host, which will now receive it. The cookie layer (NewClient)
// stores it under the mirror's host, as it should.
func TestCarriedCookiesOnlyForTheirHost(t *testing.T) {
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "mirror_session", Value: "secret", Path: "/"})
		w.WriteHeader(503)
	}))
	defer mirror.Close()
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer primary.Close()
	mu, _ := url.Parse(mirror.URL)
	mirrorHost := "localhost:" + mu.Port() // another host name than 127.0.0.1
	prepare := func(r *http.Request, attempt int) error {
		if attempt == 1 { // first attempt to the mirror, then the primary
			r.URL.Host, r.Host = mirrorHost, ""
		}
		return nil
	}
	pu, _ := url.Parse(primary.URL)
	for _, under := range []string{"NewClient+cookie layer", "NewTransport+Client.Jar"} {
		t.Run(under, func(t *testing.T) {
			cfg := retrystack.Config{Policy: quick(), Prepare: prepare}
			jar, _ := stdjar.New(nil)
			var c *http.Client
			if under == "NewClient+cookie layer" {
				cfg.Cookies = rjar.Config{Jar: jar}
				c, _ = retrystack.NewClient(cfg)
			} else {
				rt, err := retrystack.NewTransport(cfg)
				if err != nil {
					t.Fatal(err)
				}
				c = &http.Client{Transport: rt, Jar: jar}
			}
			resp, err := c.Get(primary.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if cs := jar.Cookies(pu); len(cs) != 0 {
				t.Errorf("jar sends %v to the primary %s: the mirror's cookie was stored for the wrong host", cs, pu.Host)
			}
		})
	}
}

// R5. A retry layer used without a Stack (documented: it "starts the
// operation itself") joins any operation found in the request's context:
// a token POST that Prepare makes with r.Context() through such a client,
// or a later POST made with resp.Request.Context(), is sent with the
// other operation's Idempotency-Key (the server dedups or rejects it).
func TestABareRetryLayerStartsItsOwnOperation(t *testing.T) {
	var mu sync.Mutex
	keys := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.URL.Path] = append(keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer srv.Close()
	p2 := quick()
	p2.IdempotencyKeys = true
	e2, _ := engine.New(engine.Config{Policy: *p2})
	bare := &http.Client{Transport: e2.Layer().Wrap(http.DefaultTransport)}

	p1 := quick()
	p1.IdempotencyKeys = true
	rt, _ := retrystack.NewTransport(retrystack.Config{Policy: p1, Prepare: func(r *http.Request, attempt int) error {
		req, _ := http.NewRequestWithContext(r.Context(), "POST", srv.URL+"/token", strings.NewReader("grant"))
		resp, err := bare.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}})
	resp, err := (&http.Client{Transport: rt}).Post(srv.URL+"/charge", "text/plain", strings.NewReader("charge 1"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequestWithContext(resp.Request.Context(), "POST", srv.URL+"/charge2", strings.NewReader("charge 2"))
	if resp2, err := bare.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp2.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if k := keys["/charge"][0]; k == keys["/token"][0] || k == keys["/charge2"][0] {
		t.Errorf("keys by path %v: three operations, one Idempotency-Key", keys)
	}
}

// R6. The retry layer appends carried Set-Cookie lines to the final
// response's Header in place: a Header map shared by a layer below (a
// cache's stored response) accumulates every operation's discarded
// cookies, and concurrent operations race on it.
func TestCarryingCopiesTheHeader(t *testing.T) {
	shared := http.Header{"Content-Type": {"text/plain"}}
	var n atomic.Int32
	base := middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if n.Add(1)%2 == 1 {
			return &http.Response{StatusCode: 503, Header: http.Header{"Set-Cookie": {fmt.Sprintf("u%d=x", n.Load())}}, Body: http.NoBody, Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Header: shared, Body: http.NoBody, Request: r}, nil // a cached answer
	})
	rt, _ := retrystack.NewTransport(retrystack.Config{Policy: quick(), Transport: base})
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest("GET", "http://cache.test/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if sc := shared["Set-Cookie"]; len(sc) != 0 {
		t.Errorf("the cache's stored header now carries %v: user 1's cookie is served to user 2", sc)
	}
}

// An answer that arrives once Policy.Timeout has passed is thrown away:
// with DropDiscarded its cookie is named lost.
func TestLateAnswerCookieIsNamed(t *testing.T) {
	base := middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done() // answers only once the deadline has passed
		return &http.Response{StatusCode: 200, Header: http.Header{"Set-Cookie": {"late=1"}}, Body: http.NoBody, Request: r}, nil
	})
	p := quick()
	p.Timeout = 20 * time.Millisecond
	var pitfalls []engine.Event
	var mu sync.Mutex
	c, err := retrystack.NewClient(retrystack.Config{Policy: p, Transport: base,
		Cookies: rjar.Config{Jar: rjar.NewJar(), DropDiscarded: true},
		Hooks:   engine.Hooks{OnPitfall: func(ev engine.Event) { mu.Lock(); pitfalls = append(pitfalls, ev); mu.Unlock() }}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get("http://late.test/")
	mu.Lock()
	defer mu.Unlock()
	if err == nil || len(pitfalls) != 1 || pitfalls[0].Pitfall != engine.PitfallCookieLost || fmt.Sprint(pitfalls[0].Cookies) != "[late]" {
		t.Errorf("err %v, pitfalls %+v: want cookie-lost [late]", err, pitfalls)
	}
}
