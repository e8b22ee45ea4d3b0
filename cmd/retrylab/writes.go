package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/policy"
)

// writeRows redo seed 004's counter-example, a POST that the server
// processes before its connection drops, with an automatic Idempotency-Key
// and the idempotency middleware: retried, yet processed once.
var writeRows = []scenario{
	{
		id:     "writes/auto-key-lost-after-write",
		setup:  "client with policy.IdempotencyKeys; server with idempotency.Handler (in-memory store); a POST that the server processes, then its connection drops before the response",
		preset: "default", tune: autoKeys,
		run: func(t *trial) {
			w := newWriteServer(1, 1)
			defer w.close()
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"2", "200|201", "success", "posts_processed=1"},
	},
	{
		id:     "writes/two-instances-shared-store",
		setup:  "the same against two instances behind a round-robin front, sharing one store: the first attempt reaches instance 1 (processed, then dropped), the retry instance 2",
		preset: "default", tune: autoKeys,
		run: func(t *trial) {
			w := newWriteServer(2, 1)
			defer w.close()
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"2", "200|201", "success", "posts_processed=1"},
	},
	{
		id:     "writes/concurrent-duplicate",
		setup:  "two POSTs with the same Idempotency-Key at once, retries off (1 attempt), the first still being processed when the second arrives (the subject; with attempts left, it would ask again until the first's answer is stored)",
		preset: "default", tune: oneAttempt,
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			w.hold = make(chan struct{})
			first := make(chan op, 1)
			go func() { first <- t.measureWrite("POST", w.url(), `{"item":1}`, "Idempotency-Key", "k-1") }()
			<-w.entered // the first is in the handler
			second := t.measureWrite("POST", w.url(), `{"item":1}`, "Idempotency-Key", "k-1")
			close(w.hold)
			// Concurrent: each counts the requests its report made (one
			// each; the server saw both).
			t.ops = append(t.ops, <-first, second)
			t.subject = 1
			w.record(t)
		},
		want: expect{"1,1", "409", "-", "posts_processed=1"},
	},
	{
		id:     "writes/key-reused-other-body",
		setup:  "a second POST with an Idempotency-Key already used for another body (the subject)",
		preset: "default", tune: oneAttempt,
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			t.writeOp(w, "POST", `{"item":1}`, "Idempotency-Key", "k-1")
			t.writeOp(w, "POST", `{"item":2}`, "Idempotency-Key", "k-1")
			t.subject = 1
			w.record(t)
		},
		want: expect{"1,1", "422", "non-retryable", "posts_processed=1"},
	},
	{
		id:     "writes/hedged-keyed-post",
		setup:  "client with policy.IdempotencyKeys and a hedging layer (one hedge after 50 ms) inside the retry layer; idempotency.Handler (in-memory store) whose handler takes 200 ms and answers 201: the hedge layer sends no copy of a keyed POST",
		preset: "default", tune: autoKeys, stack: []string{"redirect", "cookies", "retry", "hedge"}, hedge: hedge.Config{Delay: 50 * time.Millisecond},
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			w.delay = 200 * time.Millisecond
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"1", "201", "success", "posts_processed=1"},
	},
	{
		id:     "writes/attempt-timeout-then-replay",
		setup:  "client with policy.IdempotencyKeys, AttemptTimeout 100 ms, Timeout 5 s; idempotency.Handler whose handler takes 300 ms and answers 201: the retry finds the first still running (409), asks again, and gets its stored answer (replayed)",
		preset: "default", tune: func(p *policy.Policy) {
			p.IdempotencyKeys, p.AttemptTimeout, p.Timeout = true, 100*time.Millisecond, 5*time.Second
		},
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			w.delay = 300 * time.Millisecond
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"-", "201", "success", "posts_processed=1;replayed=true"},
	},
	{
		id:     "writes/refused-before-handler-runs-again",
		setup:  "client with policy.IdempotencyKeys; the idempotency store is unavailable for the first claim (503 from idempotency.Handler, the handler does not run), then works: nothing was stored for the refusal, so the retry runs the handler",
		preset: "default", tune: autoKeys,
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			w.store.fail.Store(1)
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"2", "201", "success", "posts_processed=1"},
	},
	{
		id:     "writes/replayed-answer-final",
		setup:  "client with policy.IdempotencyKeys, 500 retryable (the default); the handler writes, then answers 500, which idempotency.Handler stores (the write happened); the retry gets the stored 500 replayed, and the client stops there",
		preset: "default", tune: autoKeys,
		run: func(t *trial) {
			w := newWriteServer(1, 0)
			defer w.close()
			w.status = http.StatusInternalServerError
			t.writeOp(w, "POST", `{"item":1}`)
			w.record(t)
		},
		want: expect{"2", "500", "-", "posts_processed=1;replayed=true"},
	},
}

func autoKeys(p *policy.Policy)   { p.IdempotencyKeys = true }
func oneAttempt(p *policy.Policy) { p.MaxAttempts = 1 }

// writeServer is instances of an orders service behind a round-robin
// front, sharing one idempotency store.
type writeServer struct {
	srv       *httptest.Server
	store     *flakyStore
	requests  atomic.Int32
	processed atomic.Int32
	entered   chan struct{} // closed when the first write starts
	hold      chan struct{} // when set, the first write waits on it
	delay     time.Duration // each write takes this long
	status    int           // each write's answer; 0: 201
}

// flakyStore is a MemoryStore that fails the next fail claims, as a store
// behind a network does.
type flakyStore struct {
	*idempotency.MemoryStore
	fail atomic.Int32
}

func (s *flakyStore) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	if s.fail.Add(-1) >= 0 {
		return nil, nil, errors.New("the store is unavailable")
	}
	return s.MemoryStore.Begin(ctx, key, fp, lease)
}

// newWriteServer starts instances sharing a store; the first drops
// requests lose their answer after the write.
func newWriteServer(instances, drops int) *writeServer {
	w := &writeServer{entered: make(chan struct{}), store: &flakyStore{MemoryStore: idempotency.NewMemoryStore(0, nil)}}
	var handlers []http.Handler
	for range instances {
		handlers = append(handlers, idempotency.Handler(http.HandlerFunc(w.write), idempotency.Config{Store: w.store}))
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := int(w.requests.Add(1))
		h := handlers[(n-1)%len(handlers)]
		if n <= drops { // processed, then the connection drops before the answer
			h.ServeHTTP(httptest.NewRecorder(), r)
			if conn, _, err := http.NewResponseController(rw).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(rw, r)
	}))
	return w
}

func (w *writeServer) write(rw http.ResponseWriter, r *http.Request) {
	n := w.processed.Add(1)
	if n == 1 {
		close(w.entered)
		if w.hold != nil {
			<-w.hold
		}
	}
	io.Copy(io.Discard, r.Body)
	if w.delay > 0 {
		time.Sleep(w.delay) // the write's own work
	}
	if w.status != 0 {
		rw.WriteHeader(w.status)
		return
	}
	rw.WriteHeader(http.StatusCreated)
	io.WriteString(rw, `{"order":`+strconv.Itoa(int(n))+`}`)
}

func (w *writeServer) url() string { return w.srv.URL + "/orders" }
func (w *writeServer) close()      { w.srv.Close() }

func (w *writeServer) record(t *trial) {
	t.extra["posts_processed"] = strconv.Itoa(int(w.processed.Load()))
	if rep := t.ops[len(t.ops)-1].report; rep != nil && rep.Replayed {
		t.extra["replayed"] = "true"
	}
}

// writeOp sends one request to w as the trial's operation, counting the
// requests w saw during it.
func (t *trial) writeOp(w *writeServer, method, body string, header ...string) {
	before := w.requests.Load()
	o := t.measureWrite(method, w.url(), body, header...)
	o.requests = int(w.requests.Load() - before)
	t.ops = append(t.ops, o)
}

// measureWrite sends one request, its requests counted from its report.
func (t *trial) measureWrite(method, url, body string, header ...string) op {
	status, _, rep, err := t.requestTo(t.ctx, method, url, strings.NewReader(body), header...)
	o := op{report: rep, result: strconv.Itoa(status)}
	if err != nil {
		o.result = "error"
	}
	if rep != nil {
		o.requests = len(rep.Attempts) + rep.TransparentAttempts()
	}
	return o
}
