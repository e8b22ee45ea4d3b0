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
	"go.opentelemetry.io/otel/trace"
)

// The cross-layer protocol on the spans: the time left each attempt told
// the server, the caller's attempt the operation serves, and a pushback as
// the stop reason.
func TestCrossLayerOnSpans(t *testing.T) {
	rec, tel := traced(t)
	bottom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(crosslayer.ShouldRetryHeader, "false")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer bottom.Close()
	client, err := retrystack.NewClient(retrystack.Config{Telemetry: tel})
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
	req.Header.Set(crosslayer.AttemptHeader, "2; max=3")
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	defer cancel()
	req.Header.Set(crosslayer.TimeoutHeader, "4000")
	w := httptest.NewRecorder()
	svc.ServeHTTP(w, req.WithContext(ctx))
	if w.Header().Get(crosslayer.ShouldRetryHeader) != "false" {
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
