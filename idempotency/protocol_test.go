package idempotency_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/idempotency"
)

// A key outside the draft's syntax (an sf-string; a bare run of visible
// ASCII is accepted too, as clients send it) gets 400, and the handler
// never runs for it.
func TestKeySyntax(t *testing.T) {
	for _, tt := range []struct {
		field []string
		ok    bool
	}{
		{[]string{`"k1"`}, true},
		{[]string{`k1`}, true},
		{[]string{` "k1" `}, true},
		{[]string{`"a b"`}, true},
		{[]string{`"a\"b\\c"`}, true},
		{[]string{`3f2b7c1e-9d4a-4f6b-8e21-5a0c9d7e4b13`}, true},
		{[]string{``}, false},
		{[]string{`""`}, false},
		{[]string{`   `}, false},
		{[]string{`"k1`}, false},
		{[]string{`"k1";p=1`}, false},
		{[]string{`"k1"x`}, false},
		{[]string{`a b`}, false},
		{[]string{`a"b`}, false},
		{[]string{`abc;p=1`}, false},
		{[]string{`a,b`}, false},
		{[]string{`"a","b"`}, false},
		{[]string{`"a\nb"`}, false},
		{[]string{"\"a\x01b\""}, false},
		{[]string{"a\x7fb"}, false},
		{[]string{"\"caf\xc3\xa9\""}, false},
		{[]string{`"a\x"`}, false},
		{[]string{`"k1"`, `"k2"`}, false},
	} {
		o := &orders{}
		req := httptest.NewRequest("POST", "/", strings.NewReader("x"))
		req.Header["Idempotency-Key"] = tt.field
		rec := httptest.NewRecorder()
		idempotency.Handler(o, idempotency.Config{}).ServeHTTP(rec, req)
		switch {
		case tt.ok && (rec.Code != 201 || o.writes.Load() != 1):
			t.Errorf("%q: %d, %d writes; want 201 and one write", tt.field, rec.Code, o.writes.Load())
		case !tt.ok && (rec.Code != 400 || rec.Header().Get("Content-Type") != "application/problem+json" || o.writes.Load() != 0):
			t.Errorf("%q: %d %s, %d writes; want 400 problem+json and no write", tt.field, rec.Code, rec.Header().Get("Content-Type"), o.writes.Load())
		}
	}
}

// Keys scoped per principal: another principal's request with the same
// key, target and body is another request, and never gets the first one's
// answer (its Set-Cookie above all).
func TestPrincipalScopesKeys(t *testing.T) {
	var writes atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writes.Add(1)
		http.SetCookie(w, &http.Cookie{Name: "session", Value: r.Header.Get("Account")})
		w.WriteHeader(201)
		io.WriteString(w, "for "+r.Header.Get("Account"))
	})
	srv := httptest.NewServer(idempotency.Handler(h, idempotency.Config{Principal: func(r *http.Request) string { return r.Header.Get("Account") }}))
	defer srv.Close()
	send := func(account string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", `"shared"`)
		req.Header.Set("Account", account)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	send("alice")
	resp, body := send("mallory")
	if body != "for mallory" || resp.Header.Get("Idempotent-Replayed") != "" || strings.Contains(resp.Header.Get("Set-Cookie"), "alice") {
		t.Errorf("another principal got %q, replayed %q, cookie %q", body, resp.Header.Get("Idempotent-Replayed"), resp.Header.Get("Set-Cookie"))
	}
	resp, body = send("alice")
	if body != "for alice" || resp.Header.Get("Idempotent-Replayed") != "true" || writes.Load() != 2 {
		t.Errorf("the first principal's retry: %q, replayed %q, %d writes; want its own answer replayed, 2 writes", body, resp.Header.Get("Idempotent-Replayed"), writes.Load())
	}
}

// watched is a ResponseWriter that says whether the answer has started.
type watched struct {
	*httptest.ResponseRecorder
	started atomic.Bool
}

func (w *watched) WriteHeader(code int) { w.started.Store(true); w.ResponseRecorder.WriteHeader(code) }
func (w *watched) Write(p []byte) (int, error) {
	w.started.Store(true)
	return w.ResponseRecorder.Write(p)
}

// scriptedStore is a MemoryStore whose claims run a check before their
// Complete, and may fail it; with commits, they say they commit the
// handler's writes (Claim's optional Commits method).
type scriptedStore struct {
	*idempotency.MemoryStore
	beginErr   error // the next Begin's, once
	completeOf func() error
	commits    bool
}

func (s *scriptedStore) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	if err := s.beginErr; err != nil {
		s.beginErr = nil
		return nil, nil, err
	}
	c, rec, err := s.MemoryStore.Begin(ctx, key, fp, lease)
	if c != nil {
		c = scriptedClaim{c, s}
	}
	return c, rec, err
}

type scriptedClaim struct {
	idempotency.Claim
	s *scriptedStore
}

func (c scriptedClaim) Commits() bool { return c.s.commits }

func (c scriptedClaim) Complete(ctx context.Context, rec *idempotency.Record, keep time.Duration) error {
	if f := c.s.completeOf; f != nil {
		if err := f(); err != nil {
			c.Claim.Release(ctx)
			return err
		}
	}
	return c.Claim.Complete(ctx, rec, keep)
}

// The answer is stored before it goes out: a retry that follows the
// answer always finds it, even when the process dies in between.
func TestAnswerStoredBeforeSent(t *testing.T) {
	w := &watched{ResponseRecorder: httptest.NewRecorder()}
	store := &scriptedStore{MemoryStore: idempotency.NewMemoryStore(0, nil)}
	store.completeOf = func() error {
		if w.started.Load() {
			t.Error("the answer started before Complete")
		}
		return nil
	}
	req := httptest.NewRequest("POST", "/", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "k")
	idempotency.Handler(&orders{}, idempotency.Config{Store: store}).ServeHTTP(w, req)
	if w.Code != 201 || !strings.Contains(w.Body.String(), `"order":1`) || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("%d %v %q", w.Code, w.Header(), w.Body)
	}
}

// A transactional store whose commit fails undid the handler's writes:
// the client gets 503 (none of the handler's answer, its cookie
// included), and the retry runs the handler.
func TestNotCommittedAnswers503(t *testing.T) {
	var writes atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writes.Add(1)
		http.SetCookie(w, &http.Cookie{Name: "order", Value: "1"})
		w.WriteHeader(201)
	})
	store := &scriptedStore{MemoryStore: idempotency.NewMemoryStore(0, nil)}
	store.completeOf = func() error { return idempotency.ErrNotCommitted }
	var told []error
	srv := httptest.NewServer(idempotency.Handler(h, idempotency.Config{Store: store, OnStoreError: func(_ *http.Request, err error) { told = append(told, err) }}))
	defer srv.Close()
	resp, body := post(t, srv.URL, "k", "x")
	if resp.StatusCode != 503 || resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Content-Type") != "application/problem+json" || len(told) != 1 || !errors.Is(told[0], idempotency.ErrNotCommitted) {
		t.Errorf("%d %v %s, told %v; want a bare 503 problem, the hook told", resp.StatusCode, resp.Header, body, told)
	}
	store.completeOf = nil
	if resp, _ := post(t, srv.URL, "k", "x"); resp.StatusCode != 201 || writes.Load() != 2 {
		t.Errorf("the retry: %d after %d runs; want 201, the handler run again", resp.StatusCode, writes.Load())
	}
}

// The server stores an answer if and only if the handler ran: its own 500
// is stored and replayed (its effect may have happened), a refusal before
// it ran (the store failed) is not, so the retry runs the handler.
func TestStoredIfAndOnlyIfTheHandlerRan(t *testing.T) {
	var writes atomic.Int32
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writes.Add(1)
		http.Error(w, "the ledger failed after writing", http.StatusInternalServerError)
	})
	store := &scriptedStore{MemoryStore: idempotency.NewMemoryStore(0, nil)}
	srv := httptest.NewServer(idempotency.Handler(fail, idempotency.Config{Store: store}))
	defer srv.Close()
	post(t, srv.URL, "ran", "x")
	resp, body := post(t, srv.URL, "ran", "x")
	if resp.StatusCode != 500 || resp.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(body, "ledger") || writes.Load() != 1 {
		t.Errorf("the handler's 500: retry got %d %q (replayed %q) after %d runs; want it replayed, one run", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"), writes.Load())
	}

	store.beginErr = errors.New("dial tcp: connection refused")
	ok := &orders{}
	srv2 := httptest.NewServer(idempotency.Handler(ok, idempotency.Config{Store: store}))
	defer srv2.Close()
	if resp, _ := post(t, srv2.URL, "refused", "x"); resp.StatusCode != 503 || ok.writes.Load() != 0 {
		t.Fatalf("the store failing: %d, %d runs; want 503 before the handler", resp.StatusCode, ok.writes.Load())
	}
	if resp, _ := post(t, srv2.URL, "refused", "x"); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "" || ok.writes.Load() != 1 {
		t.Errorf("the retry after the refusal: %d (replayed %q), %d runs; want the handler run", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), ok.writes.Load())
	}
}

// A handler that flushes streams its answer, and its replay still has the
// whole body.
func TestFlushingHandler(t *testing.T) {
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "first ")
		http.NewResponseController(w).Flush()
		io.WriteString(w, "second")
	}), idempotency.Config{}))
	defer srv.Close()
	_, b1 := post(t, srv.URL, "k", "x")
	resp, b2 := post(t, srv.URL, "k", "x")
	if b1 != "first second" || b2 != b1 || resp.Header.Get("Idempotent-Replayed") != "true" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("first %q, replay %q %v", b1, b2, resp.Header)
	}
}

// Trailers: an answer held until it is stored goes out whole, its
// trailers as headers, and its replay is the same answer.
func TestTrailersOfAHeldAnswer(t *testing.T) {
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(201)
		io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "abc")
	}), idempotency.Config{}))
	defer srv.Close()
	for i := range 2 {
		resp, body := post(t, srv.URL, "k", "x")
		if body != "body" || resp.Header.Get("X-Checksum") != "abc" || resp.Header.Get("Trailer") != "" || resp.Trailer.Get("X-Checksum") != "" {
			t.Errorf("answer %d: %q, header %v, trailer %v: want the checksum as a header, no trailer declared", i, body, resp.Header, resp.Trailer)
		}
	}
}

// A 103 sends the header as it is then; a field the handler removes
// after it is not in the final answer.
func TestEarlyHints(t *testing.T) {
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.WriteHeader(201)
	}), idempotency.Config{}))
	defer srv.Close()
	for i := range 2 {
		if resp, _ := post(t, srv.URL, "k", "x"); resp.StatusCode != 201 || resp.Header.Get("Link") != "" {
			t.Errorf("answer %d: %d, Link %q: want 201 without it", i, resp.StatusCode, resp.Header.Get("Link"))
		}
	}
}

// A handler that takes the connection owns the exchange: nothing is
// stored (a retry runs it again), and the middleware writes nothing on
// the hijacked connection.
func TestHijackingHandler(t *testing.T) {
	var runs atomic.Int32
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		brw.Flush()
	}), idempotency.Config{}))
	defer srv.Close()
	for i := range 2 {
		// The client may read the hijacked answer before the handler has
		// returned and given its key up: meanwhile a retry meets 409, as
		// any duplicate in flight does, and asks again.
		resp, body := post(t, srv.URL, "k", "x")
		for deadline := time.Now().Add(10 * time.Second); resp.StatusCode == http.StatusConflict && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
			resp, body = post(t, srv.URL, "k", "x")
		}
		if resp.StatusCode != 202 || body != "ok" || resp.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("answer %d: %d %q (replayed %q): want the handler's own 202", i, resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
		}
	}
	if runs.Load() != 2 {
		t.Errorf("%d runs, want 2 (nothing stored for a hijacked exchange)", runs.Load())
	}
}

// With a store that commits the handler's writes, nothing goes out before
// the commit: not an answer larger than MaxStoredBody, not one the
// handler flushes. A commit that fails answers 503 in its place.
func TestHeldUntilCommit(t *testing.T) {
	big := strings.Repeat("x", 100)
	var fail atomic.Bool
	fail.Store(true)
	store := &scriptedStore{MemoryStore: idempotency.NewMemoryStore(0, nil), commits: true, completeOf: func() error {
		if fail.Load() {
			return idempotency.ErrNotCommitted
		}
		return nil
	}}
	srv := httptest.NewServer(idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		io.WriteString(w, big)
		http.NewResponseController(w).Flush()
		io.WriteString(w, big)
	}), idempotency.Config{Store: store, MaxStoredBody: 10}))
	defer srv.Close()
	if resp, body := post(t, srv.URL, "k", "x"); resp.StatusCode != 503 || strings.Contains(body, "xxx") {
		t.Fatalf("a failed commit: %d %q, want 503 and none of the handler's answer", resp.StatusCode, body)
	}
	fail.Store(false)
	resp, body := post(t, srv.URL, "k", "x")
	if resp.StatusCode != 201 || body != big+big {
		t.Errorf("after the commit: %d, %d bytes; want 201 and the whole answer", resp.StatusCode, len(body))
	}
	if resp, body := post(t, srv.URL, "k", "x"); resp.Header.Get("Idempotent-Replayed") != "body-not-kept" || body != "" {
		t.Errorf("the replay: %q %q, want body-not-kept (larger than MaxStoredBody)", resp.Header.Get("Idempotent-Replayed"), body)
	}
}
