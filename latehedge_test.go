package retrystack_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// With a hedge layer above the retry layer, a hedge whose send reaches
// the retry layer only after the first send won (it was held up, here
// until the hedge layer cancelled it) fails at once. ReportOf and the
// operation span still tell the winner's story: a send that came late and
// failed does not take the operation's record over (telemetry's operation
// span reads the same record: operation.ResultOf).
func TestLateHedgeDoesNotTakeTheReport(t *testing.T) {
	hedged := make(chan struct{}) // closed when the hedge is sent: the first send may answer then
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hedged:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var once sync.Once
	late := make(chan struct{}) // closed when the late hedge's retry layer returned
	holdHedge := middleware.Layer{Name: "hold-hedge", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if operation.HedgeOf(r.Context()) == 0 {
				return next.RoundTrip(r)
			}
			once.Do(func() { close(hedged) })
			<-r.Context().Done() // the first send won: the hedge layer cancels this one
			defer close(late)
			return next.RoundTrip(r)
		})
	}}
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := middleware.NewStack(hedge.Layer(hedge.Config{Delay: time.Millisecond}), holdHedge, e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: s.Then(tr)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-late
	if rep := engine.ReportOf(resp); rep.Stop != policy.StopSuccess || len(rep.Attempts) != 1 || rep.Attempts[0].Status != 200 {
		t.Fatalf("report of the winning send: %v", rep)
	}
}
