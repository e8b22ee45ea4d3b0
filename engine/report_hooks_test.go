package engine

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// An operation that ends at its first attempt has the same report with
// and without a hook: nothing in it depends on who watches.
func TestReportSameWithAndWithoutHooks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/replayed":
			w.Header().Set("Idempotent-Replayed", "?1")
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		}
		io.WriteString(w, "body")
	}))
	defer srv.Close()
	for _, path := range []string{"/ok", "/replayed", "/missing"} {
		t.Run(path, func(t *testing.T) {
			var reports [2]*Report
			for i, hooked := range []bool{false, true} {
				cfg := Config{Policy: policy.Default()}
				if hooked {
					cfg.Hooks.OnAttempt = func(Event) {}
				}
				resp, err := stackClient(t, mustNew(t, cfg).Layer()).Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				reports[i] = ReportOf(resp)
				if reports[i] != ReportOf(resp) {
					t.Fatal("ReportOf returns a new report on each call")
				}
				if reports[i].Elapsed <= 0 {
					t.Fatalf("elapsed %v", reports[i].Elapsed)
				}
			}
			if diff := cmp.Diff(reports[1], reports[0], cmpopts.IgnoreFields(Report{}, "Elapsed"), cmpopts.IgnoreUnexported(Report{})); diff != "" {
				t.Fatalf("the report without hooks differs from the one with (-hooked +plain):\n%s", diff)
			}
			want := policy.StopSuccess
			if path == "/missing" {
				want = policy.StopNonRetryable
			}
			if r := reports[0]; r.Stop != want || len(r.Attempts) != 1 || r.Attempts[0].Decision.Stop != want || r.Replayed != (path == "/replayed") {
				t.Fatalf("report %+v", r)
			}
		})
	}
}

// A stop of a classifier's own is the report's stop, and its attempt's.
func TestClassifierStopInReport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p := policy.Default()
	p.Classify = func(policy.Attempt) policy.Decision { return policy.Stop("mine") }
	resp, err := stackClient(t, mustNew(t, Config{Policy: p}).Layer()).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rep := ReportOf(resp); rep.Stop != "mine" || len(rep.Attempts) != 1 || rep.Attempts[0].Decision.Stop != "mine" {
		t.Fatalf("report %v", rep)
	}
}

// mustNew is New(cfg), or fails t.
func mustNew(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// stackClient is a client that sends through a Stack of layers over a
// transport of its own, whose idle connections close when t ends.
func stackClient(t *testing.T, layers ...middleware.Layer) *http.Client {
	t.Helper()
	c := &http.Client{Transport: mustStack(t, layers...).Then(&http.Transport{})}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// A body that fails after the operation returned sets the stop of the one
// report, whether it was asked for before the read, during it (from
// several goroutines at once) or after.
func TestReportSeesTheBodyFail(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "ten bytes.") // and the connection closes: the body lied about its length
	}))
	defer srv.Close()
	for _, askFirst := range []bool{false, true} {
		resp, err := stackClient(t, mustNew(t, Config{Policy: policy.Default()}).Layer()).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var before *Report
		if askFirst {
			before = ReportOf(resp)
			if before.Stop != policy.StopSuccess {
				t.Fatalf("before the read: stop %s", before.Stop)
			}
		}
		var wg sync.WaitGroup
		got := make([]*Report, 8)
		for i := range got {
			wg.Go(func() { got[i] = ReportOf(resp) })
		}
		_, rerr := io.Copy(io.Discard, resp.Body)
		wg.Wait()
		resp.Body.Close()
		var ee *Error
		if !errors.As(rerr, &ee) {
			t.Fatalf("read error %v, want an *Error", rerr)
		}
		rep := ReportOf(resp)
		if ee.Report != rep || (askFirst && before != rep) {
			t.Fatal("the read's error and ReportOf hold different reports")
		}
		for _, r := range got {
			if r != rep {
				t.Fatal("concurrent ReportOf calls made more than one report")
			}
		}
		if rep.Stop != policy.StopBodyFailed || len(rep.Attempts) != 1 || rep.Attempts[0].Status != 200 {
			t.Fatalf("report %v", rep)
		}
	}
}
