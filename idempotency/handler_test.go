package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/policy"
)

// orders is a handler that counts the writes it performs.
type orders struct {
	writes atomic.Int32
	hold   chan struct{} // when set, the first write waits on it
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.writes.Add(1)
	if n == 1 && o.hold != nil {
		<-o.hold
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"order": n, "item": string(body)})
}

func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestProtocol(t *testing.T) {
	o := &orders{}
	srv := httptest.NewServer(idempotency.Handler(o, idempotency.Config{Required: true, MaxKeyLength: 8, MaxRequestBody: 16}))
	defer srv.Close()

	first, body1 := post(t, srv.URL, `"k1"`, "apple")
	again, body2 := post(t, srv.URL, `"k1"`, "apple")
	if first.StatusCode != 201 || again.StatusCode != 201 || body1 != body2 || again.Header.Get("Idempotent-Replayed") != "true" || o.writes.Load() != 1 {
		t.Errorf("first %d %q, again %d %q (replayed %q), %d writes; want one write replayed",
			first.StatusCode, body1, again.StatusCode, body2, again.Header.Get("Idempotent-Replayed"), o.writes.Load())
	}
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Error("the first answer is marked as a replay")
	}
	// The older X-Idempotency-Key names the same key when Idempotency-Key
	// is absent.
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("apple"))
	req.Header.Set("X-Idempotency-Key", "k1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("X-Idempotency-Key: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, tt := range []struct {
		name, key, body string
		status          int
	}{
		{"same key, other body", "k1", "pear", 422},
		{"missing key", "", "apple", 400},
		{"key too long", "123456789", "apple", 400},
		{"body too large", "k2", strings.Repeat("x", 17), 413},
	} {
		resp, b := post(t, srv.URL, tt.key, tt.body)
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(b, `"status":`) {
			t.Errorf("%s: %d %s %q, want %d as problem+json", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), b, tt.status)
		}
	}
	if o.writes.Load() != 1 {
		t.Errorf("%d writes, want 1", o.writes.Load())
	}
	// Other methods pass through untouched.
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o.writes.Load() != 2 {
		t.Errorf("a GET did not reach the handler")
	}
}

// A duplicate while the first is still running gets 409.
func TestConcurrentDuplicate(t *testing.T) {
	o := &orders{hold: make(chan struct{})}
	srv := httptest.NewServer(idempotency.Handler(o, idempotency.Config{}))
	defer srv.Close()
	done := make(chan int)
	go func() { resp, _ := post(t, srv.URL, "k", "apple"); done <- resp.StatusCode }()
	for o.writes.Load() == 0 {
		runtime.Gosched() // the first request is in the handler once writes is 1
	}
	resp, _ := post(t, srv.URL, "k", "apple")
	close(o.hold)
	if first := <-done; resp.StatusCode != 409 || first != 201 {
		t.Errorf("duplicate %d, first %d; want 409, 201", resp.StatusCode, first)
	}
}

// A response too large to keep is sent whole; a replay has its status and
// headers only, and says so.
func TestLargeResponse(t *testing.T) {
	big := strings.Repeat("x", 100)
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		io.WriteString(w, big)
	}), idempotency.Config{MaxStoredBody: 10}))
	defer srv.Close()
	_, b1 := post(t, srv.URL, "k", "x")
	resp, b2 := post(t, srv.URL, "k", "x")
	if b1 != big || b2 != "" || resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "body-not-kept" {
		t.Errorf("first %d bytes, replay %d %q %q", len(b1), resp.StatusCode, b2, resp.Header.Get("Idempotent-Replayed"))
	}
}

// A handler that panics leaves no record: the retry runs it again.
func TestPanicReleasesTheKey(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(201)
	}), idempotency.Config{}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "k")
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the aborted request answered")
	}
	if resp, _ := post(t, srv.URL, "k", "x"); resp.StatusCode != 201 || calls.Load() != 2 {
		t.Errorf("retry %d after %d calls; want 201 after 2", resp.StatusCode, calls.Load())
	}
}

// End to end: a retrystack client with IdempotencyKeys retries a POST
// whose answer was lost; the server runs it once and replays its answer.
func TestLostAnswerEndToEnd(t *testing.T) {
	o := &orders{}
	protected := idempotency.Handler(o, idempotency.Config{})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 { // processed, then the connection drops before the answer
			protected.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		protected.ServeHTTP(w, r)
	}))
	defer srv.Close()
	p := policy.Default()
	p.IdempotencyKeys = true
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("apple"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || n.Load() != 2 || o.writes.Load() != 1 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("status %d, %d requests, %d writes, replayed %q; want 201, 2, 1, true", resp.StatusCode, n.Load(), o.writes.Load(), resp.Header.Get("Idempotent-Replayed"))
	}
}

// Any key and body: the handler answers, never panics, and a duplicate
// never runs the handler twice.
func FuzzHandler(f *testing.F) {
	f.Add(`"k"`, "body")
	f.Add("", "")
	f.Add(`"`, "\x00")
	f.Add(strings.Repeat("k", 300), "x")
	f.Fuzz(func(t *testing.T, key, body string) {
		o := &orders{}
		h := idempotency.Handler(o, idempotency.Config{MaxRequestBody: 64})
		for range 2 {
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			req.Header["Idempotency-Key"] = []string{key}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == 0 {
				t.Fatal("no status")
			}
		}
		if o.writes.Load() > 1 && strings.TrimSpace(strings.Trim(strings.TrimSpace(key), `"`)) != "" && len(body) <= 64 {
			t.Errorf("key %q, body %q: %d writes", key, body, o.writes.Load())
		}
	})
}

// brokenStore fails as a store behind a network does, its error naming
// its internals.
type brokenStore struct{ idempotency.Store }

func (brokenStore) Begin(context.Context, string, string, time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	return nil, nil, errors.New("dial tcp 10.0.3.7:6379: connect: connection refused")
}

// A store that fails answers 503 without its internals (an address): the
// error reaches the server's own hook, never the client.
func TestStoreErrorsStayInside(t *testing.T) {
	var mu sync.Mutex
	var told []string
	srv := httptest.NewServer(idempotency.Handler(&orders{}, idempotency.Config{Store: brokenStore{}, OnStoreError: func(_ *http.Request, err error) {
		mu.Lock()
		told = append(told, err.Error())
		mu.Unlock()
	}}))
	defer srv.Close()
	resp, body := post(t, srv.URL, `"k1"`, "x")
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(body, "10.0.3.7") || strings.Contains(body, "6379") {
		t.Errorf("%d %s: want a 503 that names no internals", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], "10.0.3.7") {
		t.Errorf("the hook was told %q, want the store's error", told)
	}
}
