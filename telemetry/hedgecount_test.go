package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// Under a hedge, the sends run at once on one operation: the connection
// of the hedge that won is not a transparent resend of the send it beat,
// on that send's attempt span. (Found for issue 36: each attempt span
// counted the connections of every send that ran meanwhile.)
func TestNoTransparentEventsUnderAHedge(t *testing.T) {
	rec, _, tel := instrumented(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 { // the first send stalls until it loses to its hedge
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	p := policy.Default()
	p.Budget = nil // hedges draw on the budget: the hedge is the subject
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err == nil {
		stack, err = stack.InsertAfter("retry", hedge.Layer(hedge.Config{Delay: 10 * time.Millisecond}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := retrystack.Client(stack, tr).Get(srv.URL)
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
		for _, e := range s.Events() {
			if e.Name == telemetry.EventTransparent {
				h, _ := attr(s, "retrystack.hedge")
				t.Errorf("the attempt span of send %q has a transparent resend; the server saw %d requests", h, n.Load())
			}
		}
	}
	if attempts != 2 {
		t.Errorf("%d attempt spans, want 2", attempts)
	}
}
