package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/trace"
)

// The cross-layer protocol on the spans: the time left each attempt told
// the server, the caller's attempt the operation serves, and a pushback as
// the stop reason.
func TestCrossLayerOnSpans(t *testing.T) {
	rec, tel := traced(t)
	bottom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retrystack-Should-Retry", "false")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer bottom.Close()
	client, err := retrystack.NewClient(retrystack.Config{Telemetry: tel, Signals: crosslayer.Signals{To: &policy.Scope{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	// A service that calls the bottom one under its request's context.
	svc := crosslayer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", bottom.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}), crosslayer.Config{})
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Retrystack-Attempt", "2; max=3")
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	req.Header.Set("Retrystack-Timeout-Ms", "4000")
	w := httptest.NewRecorder()
	svc.ServeHTTP(w, req.WithContext(ctx))
	if w.Header().Get("Retrystack-Should-Retry") != "false" {
		t.Errorf("the service's answer does not push back: %v", w.Header())
	}

	var sawOp, sawAttempt bool
	for _, s := range rec.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			sawOp = true
			if v, _ := attr(s, "retrystack.stop_reason"); v != "pushback" {
				t.Errorf("operation stop_reason %q, want pushback", v)
			}
			if v, _ := attr(s, "retrystack.caller.attempt"); v != "2" {
				t.Errorf("operation caller.attempt %q, want 2", v)
			}
		case trace.SpanKindClient:
			sawAttempt = true
			v, _ := attr(s, "retrystack.deadline.time_left_ms")
			if ms, err := strconv.Atoi(v); err != nil || ms <= 0 || ms > 4000 {
				t.Errorf("attempt time_left_ms %q, want 1..4000", v)
			}
		}
	}
	if !sawOp || !sawAttempt {
		t.Errorf("spans: operation %v, attempt %v", sawOp, sawAttempt)
	}
}

// With renamed Signals the attempt spans still carry the time left, read
// from the header the retry layer sends under its name; with the protocol
// off, none.
func TestTimeLeftUnderRenamedSignals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		signals crosslayer.Signals
		want    bool
	}{
		{"default names", crosslayer.Signals{To: &policy.Scope{}}, true},
		{"renamed", crosslayer.Signals{Timeout: "X-Deadline-Ms", To: &policy.Scope{}}, true},
		{"off", crosslayer.Signals{Off: true, To: &policy.Scope{}}, false},
		{"no host named", crosslayer.Signals{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tel := traced(t)
			client, err := retrystack.NewClient(retrystack.Config{Telemetry: tel, Signals: tc.signals})
			if err != nil {
				t.Fatal(err)
			}
			defer client.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			req.Header.Set("Retrystack-Timeout-Ms", "5") // a caller's own header of that name is not ours under other names
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			attempts := 0
			for _, s := range rec.Ended() {
				if s.SpanKind() != trace.SpanKindClient {
					continue
				}
				attempts++
				v, ok := attr(s, "retrystack.deadline.time_left_ms")
				ms, _ := strconv.Atoi(v)
				if ok != tc.want || (tc.want && (ms < 50_000 || ms > 60_000)) {
					t.Errorf("time_left_ms %q (present %v), want present %v, about 60000", v, ok, tc.want)
				}
			}
			if attempts != 1 {
				t.Errorf("%d attempt spans", attempts)
			}
		})
	}
}
