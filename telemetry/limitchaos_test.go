package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/limit"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A concurrency limit's refusal and a chaos layer's injections are span
// events of the operation and points of their counters, with no wiring;
// an injection's event says it was injected.
func TestLimitAndChaosOnTelemetry(t *testing.T) {
	rec, reader, tel := instrumented(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	stack, err := retrystack.NewStack(retrystack.Config{Policy: &p, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	stack, err = stack.InsertAfter("retry", limit.Layer(limit.Config{Limit: 1, MaxWait: -1}))
	if err == nil {
		stack, err = stack.InsertAfter("limit", chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Status, Status: 503, Rate: 1, Attempts: 1, Paths: []string{"/chaos"}}}}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := retrystack.Client(stack, tr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Get(srv.URL + "/hold"); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	if _, err := c.Get(srv.URL + "/refused"); err == nil {
		t.Fatal("a second request passed a limit of 1")
	}
	close(release)
	<-done
	resp, err := c.Get(srv.URL + "/chaos")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := counted(t, rm, "retrystack.client.concurrency_limited", "", ""); n != 1 {
		t.Errorf("%d concurrency-limited, want 1", n)
	}
	if n := counted(t, rm, "retrystack.client.chaos.injected", "retrystack.chaos.fault", "status"); n != 1 {
		t.Errorf("%d injected statuses, want 1", n)
	}
	marked, limited := 0, 0
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			switch e.Name {
			case "retrystack.chaos":
				for _, a := range e.Attributes {
					if a.Key == "retrystack.chaos.injected" && a.Value.AsBool() {
						marked++
					}
				}
			case "retrystack.limit":
				limited++
			}
		}
	}
	if marked != 1 || limited != 1 {
		t.Errorf("span events: %d injections marked injected, %d limit refusals; want 1 and 1", marked, limited)
	}
}
