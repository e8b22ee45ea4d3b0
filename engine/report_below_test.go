package engine

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A layer of the user's below the retry layer (a logger) asks ReportOf of
// the response it passes up, while the retry layer's operation runs. The
// operation then succeeds at once: the caller's report must say so.
func TestReportAskedFromBelowKeepsItsFacts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	e := mustNew(t, Config{Policy: policy.Default()})
	logger := middleware.Layer{Name: "logger", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(r)
			if err == nil {
				_ = ReportOf(resp) // e.g. logs "attempt so far"
			}
			return resp, err
		})
	}}
	resp, err := stackClient(t, e.Layer(), logger).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	rep := ReportOf(resp)
	if rep.Stop != policy.StopSuccess || len(rep.Attempts) != 1 || rep.Attempts[0].Status != 200 {
		t.Fatalf("report after a success at once: %q, %d attempts (%v)", rep.Stop, len(rep.Attempts), rep)
	}
}

// The same through the library's own callback: a classifier that looks at
// the report so far (ReportOf of the attempt's response) before deciding.
func TestClassifierAskingTheReportKeepsItsFacts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }))
	defer srv.Close()
	p := policy.Default()
	inner := p.Classify
	p.Classify = func(a policy.Attempt) policy.Decision {
		if a.Response != nil {
			_ = ReportOf(a.Response)
		}
		return inner(a)
	}
	resp, err := stackClient(t, mustNew(t, Config{Policy: p}).Layer()).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rep := ReportOf(resp)
	if rep.Stop != policy.StopNonRetryable || len(rep.Attempts) != 1 {
		t.Fatalf("report of a 404: %q, %d attempts (%v)", rep.Stop, len(rep.Attempts), rep)
	}
}

// Over h2c, a refused stream net/http resends itself is one attempt with
// one transparent send, with no hook; with and without a caller's trace, in and
// outside a Stack.
func TestHiddenRetryH2CUnhooked(t *testing.T) {
	for _, mode := range []string{outsideStack, inStack, callerTraces} {
		t.Run(mode, func(t *testing.T) {
			srv, err := faultserver.NewH2(faultserver.H2Config{Faults: []faultserver.H2Fault{faultserver.H2Refuse}})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			e, _ := New(Config{Policy: policy.Never()})
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			defer tr.CloseIdleConnections()
			var rt http.RoundTripper = e.Layer().Wrap(tr)
			if mode != outsideStack {
				rt = mustStack(t, e.Layer()).Then(tr)
			}
			req, _ := http.NewRequest("GET", srv.URL()+"/", nil)
			var callerConns atomic.Int32
			if mode == callerTraces {
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(httptrace.GotConnInfo) { callerConns.Add(1) },
				}))
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rep := ReportOf(resp)
			if len(rep.Attempts) != 1 || rep.TransparentAttempts() != 1 || srv.Streams() != 2 {
				t.Fatalf("%d streams; report %v, transparent %d", srv.Streams(), rep, rep.TransparentAttempts())
			}
			if mode == callerTraces && callerConns.Load() != 2 {
				t.Fatalf("caller's trace saw %d connections, want 2", callerConns.Load())
			}
			if tr := httptrace.ContextClientTrace(resp.Request.Context()); tr != nil && mode != callerTraces {
				t.Fatal("kept context reaches a trace")
			}
		})
	}
}
