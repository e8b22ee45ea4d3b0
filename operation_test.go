package retrystack_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func drain(resp *http.Response, err error) {
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

type sendSummary struct {
	Statuses []int
	Resends  []int
}

func summary(rep *engine.Report) sendSummary {
	var s sendSummary
	for _, a := range rep.Attempts {
		s.Statuses = append(s.Statuses, a.Status)
		s.Resends = append(s.Resends, a.Resend)
	}
	return s
}

// A request a hook sends with the event's context, even from another
// goroutine and through another retrying client, is an operation of its
// own: the report and the send numbers of the operation stay its own.
func TestSideRequestsFromHooksAreOperationsOfTheirOwn(t *testing.T) {
	srv := newServer(t)
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := middleware.NewStack(e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	sideTr := &http.Transport{}
	defer sideTr.CloseIdleConnections()
	side := &http.Client{Transport: s.Then(sideTr)}

	for _, async := range []bool{false, true} {
		var wg sync.WaitGroup
		audit := func(ev engine.Event) {
			send := func() {
				req, _ := http.NewRequestWithContext(ev.Context, "GET", srv.URL()+"/s/200?key=audit", nil)
				drain(side.Do(req))
			}
			if async {
				wg.Go(send)
			} else {
				send()
			}
		}
		p := policy.Default()
		p.MaxAttempts, p.Budget, p.Backoff.Base = 5, nil, time.Millisecond
		tr := &http.Transport{}
		c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr, Hooks: engine.Hooks{OnAttempt: audit}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(fmt.Sprintf("%s/fail/2/503?key=main-%v", srv.URL(), async))
		if err != nil {
			t.Fatal(err)
		}
		drain(resp, nil)
		wg.Wait()
		tr.CloseIdleConnections()
		want := sendSummary{Statuses: []int{503, 503, 200}, Resends: []int{0, 1, 2}}
		if diff := cmp.Diff(want, summary(engine.ReportOf(resp))); diff != "" {
			t.Errorf("async=%v: ReportOf(the operation's response) (-want +got):\n%s", async, diff)
		}
	}
}

// With the retry layer above the redirect layer, each attempt is a whole
// redirect chain: its hops are sends of their own, not sends net/http made
// by itself.
func TestRetryAboveRedirectCountsNoTransparentSends(t *testing.T) {
	srv := newServer(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	s, err := retrystack.NewStack(retrystack.Config{Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.Swap("redirect", "retry"); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	drain(retrystack.Client(s, tr).Get(srv.URL() + "/redirect/302/1?key=r"))
	for _, sp := range rec.Ended() {
		for _, ev := range sp.Events() {
			if ev.Name == telemetry.EventTransparent {
				t.Errorf("span %q has a transparent-attempt event; the server saw one request per hop", sp.Name())
			}
		}
	}
}

// With the retry layer below the redirect layer each hop is a run of its
// own: ReportOf gives the last hop's report, and through it every hop's,
// first to last (Report.Hops), as many as the sends.
func TestReportOfCoversEveryHop(t *testing.T) {
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sends.Add(1)
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/b":
			http.Redirect(w, r, "/c", http.StatusFound)
		}
	}))
	defer srv.Close()
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := middleware.NewStack(redirect.Layer(redirect.Config{}), e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: st.Then(tr)}).Get(srv.URL + "/a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var statuses []int
	for _, h := range engine.ReportOf(resp).Hops() {
		for _, a := range h.Attempts {
			statuses = append(statuses, a.Status)
		}
	}
	if !slices.Equal(statuses, []int{302, 302, 200}) || int(sends.Load()) != len(statuses) {
		t.Fatalf("hops' attempts %v for %d sends; want [302 302 200], one per send", statuses, sends.Load())
	}
}
