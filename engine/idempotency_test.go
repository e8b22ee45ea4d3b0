package engine

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
)

// keys is a server that records the Idempotency-Key of each request and
// answers 503, 307 to /done, then 200.
type keys struct {
	mu   sync.Mutex
	seen []string
}

func (k *keys) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	k.mu.Lock()
	k.seen = append(k.seen, r.Header.Get("Idempotency-Key"))
	n := len(k.seen)
	k.mu.Unlock()
	switch {
	case n == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
	case r.URL.Path != "/done":
		http.Redirect(w, r, "/done", http.StatusTemporaryRedirect)
	}
}

// With IdempotencyKeys a POST gets a key, the same on every attempt and
// redirect hop, and is retried like an idempotent request; a caller's own
// key is kept; the caller's request does not change.
func TestIdempotencyKeys(t *testing.T) {
	k := &keys{}
	srv := httptest.NewServer(k)
	defer srv.Close()
	p := policy.Default()
	p.IdempotencyKeys = true
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	s, _ := middleware.NewStack(redirect.Layer(redirect.Config{}), e.Layer())
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader("order"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	uuid := regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)
	if len(k.seen) != 3 || !uuid.MatchString(k.seen[0]) || k.seen[1] != k.seen[0] || k.seen[2] != k.seen[0] || resp.StatusCode != 200 {
		t.Errorf("status %d, keys %q: want 3 sends with one UUID", resp.StatusCode, k.seen)
	}
	if req.Header.Get("Idempotency-Key") != "" {
		t.Error("the caller's request changed")
	}

	// An empty key is no key: it is given one.
	k.seen = nil
	req, _ = http.NewRequest("POST", srv.URL+"/orders", strings.NewReader("order"))
	req.Header.Set("Idempotency-Key", "")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(k.seen) == 0 || !uuid.MatchString(k.seen[0]) {
		t.Errorf("an empty key: sent %q", k.seen)
	}

	k.seen = nil
	req, _ = http.NewRequest("POST", srv.URL+"/orders", strings.NewReader("order"))
	req.Header.Set("Idempotency-Key", "mine")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, got := range k.seen {
		if got != "mine" {
			t.Errorf("keys %q: the caller's key was replaced", k.seen)
			break
		}
	}
}
