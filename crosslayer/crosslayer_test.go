package crosslayer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/protocol"
)

// What Handler makes of the request headers: bad, missing, negative and
// huge values are ignored or capped, and a deadline is never extended.
func TestHandlerReadsHeaders(t *testing.T) {
	tests := []struct {
		name         string
		attempt      string
		timeout      string
		parent       time.Duration // the inbound context's own deadline; 0: none
		wantPos      crosslayer.Position
		wantDeadline time.Duration // from the request's arrival; -1: none
	}{
		{"nothing", "", "", 0, crosslayer.Position{Attempt: 1}, -1},
		{"a retry", "2; max=3", "", 0, crosslayer.Position{Attempt: 2, Max: 3}, -1},
		{"attempt without max", "3", "", 0, crosslayer.Position{Attempt: 3}, -1},
		{"max below attempt is dropped", "3; max=2", "", 0, crosslayer.Position{Attempt: 3}, -1},
		{"garbage attempt", "two", "", 0, crosslayer.Position{Attempt: 1}, -1},
		{"negative attempt", "-4", "", 0, crosslayer.Position{Attempt: 1}, -1},
		{"huge attempt", "99999999999", "", 0, crosslayer.Position{Attempt: 1}, -1},
		{"time left", "", "1500", 0, crosslayer.Position{Attempt: 1}, 1500 * time.Millisecond},
		{"no time left", "", "0", 0, crosslayer.Position{Attempt: 1}, 0},
		{"negative time", "", "-5", 0, crosslayer.Position{Attempt: 1}, -1},
		{"garbage time", "", "1.5s", 0, crosslayer.Position{Attempt: 1}, -1},
		{"huge time is capped", "", "999999999999999", 0, crosslayer.Position{Attempt: 1}, time.Minute},
		{"time past int64 is capped", "", "99999999999999999999", 0, crosslayer.Position{Attempt: 1}, time.Minute},
		{"lenient parameters", "2; MAX=3; foo=1", "", 0, crosslayer.Position{Attempt: 2, Max: 3}, -1},
		{"never extends", "", "60000", time.Second, crosslayer.Position{Attempt: 1}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pos crosslayer.Position
			var ok bool
			var deadline time.Time
			var hasDeadline bool
			h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				pos, ok = crosslayer.PositionOf(r.Context())
				deadline, hasDeadline = r.Context().Deadline()
			}), crosslayer.Config{})
			before := time.Now()
			req := httptest.NewRequest("GET", "/", nil)
			if tt.attempt != "" {
				req.Header.Set("Retrystack-Attempt", tt.attempt)
			}
			if tt.timeout != "" {
				req.Header.Set("Retrystack-Timeout-Ms", tt.timeout)
			}
			if tt.parent > 0 {
				ctx, cancel := context.WithTimeout(req.Context(), tt.parent)
				defer cancel()
				req = req.WithContext(ctx)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			after := time.Now()
			if !ok || pos != tt.wantPos {
				t.Errorf("position %+v (%v), want %+v", pos, ok, tt.wantPos)
			}
			if hasDeadline != (tt.wantDeadline >= 0) {
				t.Fatalf("deadline set %v, want %v", hasDeadline, tt.wantDeadline >= 0)
			}
			// The deadline is the wanted time after the request arrived,
			// which was between before and after.
			if hasDeadline && (deadline.Before(before.Add(tt.wantDeadline)) || deadline.After(after.Add(tt.wantDeadline))) {
				t.Errorf("deadline %v after the request, want %v", deadline.Sub(before), tt.wantDeadline)
			}
		})
	}
}

// The MaxTimeout of the service caps what a caller asks.
func TestHandlerMaxTimeout(t *testing.T) {
	var left time.Duration
	h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, _ := r.Context().Deadline()
		left = time.Until(dl)
	}), crosslayer.Config{MaxTimeout: 2 * time.Second})
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Retrystack-Timeout-Ms", "30000")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if left > 2*time.Second || left <= 0 {
		t.Errorf("deadline %v away, want at most 2s", left)
	}
}

// The answer says "do not retry" only when a retry layer serving the
// request pushed back, and only on an overload status.
func TestHandlerPushback(t *testing.T) {
	tests := []struct {
		name   string
		push   bool
		status int
		write  bool // write the body without WriteHeader
		want   string
	}{
		{"503 after pushback", true, 503, false, "false"},
		{"429 after pushback", true, 429, false, "false"},
		{"503 without pushback", false, 503, false, ""},
		{"404 after pushback", true, 404, false, ""},
		{"implicit 200 after pushback", true, 200, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.push {
					inbound.From(r.Context()).PushBack() // what a retry layer that gave up does
				}
				if tt.write {
					w.Write([]byte("ok"))
					return
				}
				w.WriteHeader(tt.status)
			}), crosslayer.Config{})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if got := rec.Header().Get("Retrystack-Should-Retry"); got != tt.want || rec.Code != tt.status {
				t.Errorf("status %d, %s %q; want %d, %q", rec.Code, "Retrystack-Should-Retry", got, tt.status, tt.want)
			}
		})
	}
}

// Streaming handlers keep working: Flush reaches the server's writer and
// http.ResponseController finds it through Unwrap.
func TestHandlerKeepsTheWriter(t *testing.T) {
	h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the writer is not an http.Flusher")
		}
		if _, ok := w.(http.Hijacker); !ok {
			t.Error("the writer is not an http.Hijacker (WebSocket libraries assert it)")
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController: %v", err)
		}
		w.Write([]byte("chunk"))
		w.(http.Flusher).Flush()
	}), crosslayer.Config{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
}

// Off and custom names.
func TestSignals(t *testing.T) {
	a, tm, sr := crosslayer.Signals{Attempt: "x-attempt", ShouldRetry: "x-should-retry"}.Names()
	if a != "X-Attempt" || tm != "Retrystack-Timeout-Ms" || sr != "X-Should-Retry" {
		t.Errorf("names %q %q %q", a, tm, sr)
	}
	var seen bool
	h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, seen = crosslayer.PositionOf(r.Context())
		_, hasDeadline := r.Context().Deadline()
		seen = seen || hasDeadline
	}), crosslayer.Config{Signals: crosslayer.Signals{Off: true}})
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Retrystack-Timeout-Ms", "10")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen {
		t.Error("Off still read the headers")
	}
}

// A writer that cannot flush says so through Handler's writer too.
func TestFlushErrorPassesThrough(t *testing.T) {
	var err error
	h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err = http.NewResponseController(w).Flush()
	}), crosslayer.Config{})
	h.ServeHTTP(plainWriter{httptest.NewRecorder()}, httptest.NewRequest("GET", "/", nil))
	if !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("Flush on a writer that cannot: %v, want ErrNotSupported", err)
	}
}

// plainWriter hides the recorder's Flush.
type plainWriter struct{ w *httptest.ResponseRecorder }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }

// The headers are consumed: a proxy behind Handler does not forward the
// caller's values as its own.
func TestHandlerConsumesTheHeaders(t *testing.T) {
	var seen http.Header
	h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }), crosslayer.Config{})
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Retrystack-Attempt", "3; max=3")
	req.Header.Set("Retrystack-Timeout-Ms", "50")
	req.Header.Set("X-Other", "kept")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen.Get("Retrystack-Attempt") != "" || seen.Get("Retrystack-Timeout-Ms") != "" || seen.Get("X-Other") != "kept" {
		t.Errorf("the handler saw %v", seen)
	}
}

// The attempt header the client half writes (internal/protocol, its one
// home) is the one Handler reads, for every attempt a policy allows.
func TestAttemptHeaderRoundTrip(t *testing.T) {
	for _, c := range []struct{ n, max int }{{2, 3}, {3, 3}, {17, 10_000}, {10_000, 10_000}} {
		var pos crosslayer.Position
		h := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pos, _ = crosslayer.PositionOf(r.Context())
		}), crosslayer.Config{})
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set(protocol.AttemptHeader, protocol.AttemptValue(c.n, c.max))
		h.ServeHTTP(httptest.NewRecorder(), req)
		if pos != (crosslayer.Position{Attempt: c.n, Max: c.max}) {
			t.Errorf("%q read as %+v", protocol.AttemptValue(c.n, c.max), pos)
		}
	}
}
