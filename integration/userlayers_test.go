package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
)

// A user's own redirect layer, written outside the module on the public
// API alone (middleware.Operation.CountRedirect), is reported by the
// retry layer above it exactly as the library's redirect layer is: the
// hops counted in the attempt's Redirects, none taken for a resend of
// the transport's own.
func TestUserRedirectLayerReportedAsOurs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/b":
			http.Redirect(w, r, "/c", http.StatusSeeOther)
		default:
			io.WriteString(w, "done")
		}
	}))
	defer srv.Close()
	report := func(layer middleware.Layer) *engine.Report {
		c := retryAbove(t, layer)
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Get(srv.URL + "/a")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "done" {
			t.Fatalf("body %q", b)
		}
		return engine.ReportOf(resp)
	}
	ours, theirs := report(redirect.Layer(redirect.Config{})), report(userRedirect())
	if diff := cmp.Diff(ours, theirs, cmpopts.IgnoreFields(engine.Report{}, "Elapsed"), cmpopts.IgnoreUnexported(engine.Report{})); diff != "" {
		t.Fatalf("the user's layer is reported differently (-ours +theirs):\n%s", diff)
	}
	if a := theirs.Attempts; len(a) != 1 || a[0].Redirects != 2 || a[0].Transparent != 0 {
		t.Fatalf("report %v: want one attempt, two redirects, no transparent send", theirs)
	}
}

// retryAbove is a client whose stack is the default policy's retry layer
// above layer, over a transport of its own closed when t ends.
func retryAbove(t *testing.T, layer middleware.Layer) *http.Client {
	t.Helper()
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := middleware.NewStack(e.Layer(), layer)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: st.Then(tr)}
}

// userRedirect follows a GET's 302 and 303 within the same origin: a
// sketch, not a full redirect layer.
func userRedirect() middleware.Layer {
	return middleware.Layer{Name: "my-redirect", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			cur := req
			for hops := 0; ; hops++ {
				if hops > 0 {
					op.CountRedirect(cur.Context())
				}
				resp, err := next.RoundTrip(cur)
				if err != nil || (resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther) || hops == 10 {
					return resp, err
				}
				loc, err := cur.URL.Parse(resp.Header.Get("Location"))
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					return nil, err
				}
				cur = cur.Clone(cur.Context())
				cur.URL, cur.Host = loc, ""
			}
		})
	}}
}

// A user's own hedge layer, on the public API alone (CountHedge and
// WithHedge), is reported as the library's: the hedge counted in the
// attempt's Hedges, its connection not a transparent resend.
func TestUserHedgeLayerReportedAsOurs(t *testing.T) {
	for _, name := range []string{"ours", "theirs"} {
		t.Run(name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					<-r.Context().Done() // the first send stalls: its hedge wins
					return
				}
				io.WriteString(w, "hedge")
			}))
			defer srv.Close()
			layer := hedge.Layer(hedge.Config{Delay: time.Millisecond})
			if name == "theirs" {
				layer = userHedge()
			}
			resp, err := retryAbove(t, layer).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rep := engine.ReportOf(resp)
			if string(b) != "hedge" || len(rep.Attempts) != 1 || rep.Attempts[0].Hedges != 1 || rep.Attempts[0].Transparent != 0 {
				t.Fatalf("body %q, report %v (hedges %d, transparent %d): want the hedge's answer, one hedge, no transparent send",
					b, rep, rep.Attempts[0].Hedges, rep.TransparentAttempts())
			}
		})
	}
}

// userHedge sends a GET, then one hedge once the first has left, and
// hands back the first answer: a sketch, not a full hedge layer (it
// hedges every request, without a delay or a budget).
func userHedge() middleware.Layer {
	return middleware.Layer{Name: "my-hedge", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, _ := middleware.OperationOf(req.Context())
			type result struct {
				resp *http.Response
				err  error
			}
			results := make(chan result, 2)
			ctx, cancel := context.WithCancel(req.Context())
			defer cancel()
			go func() {
				resp, err := next.RoundTrip(req.WithContext(ctx))
				results <- result{resp, err}
			}()
			op.CountHedge(req.Context())
			h := req.Clone(op.WithHedge(ctx, 1))
			go func() {
				resp, err := next.RoundTrip(h)
				results <- result{resp, err}
			}()
			first := <-results
			var b []byte
			if first.err == nil {
				b, first.err = io.ReadAll(first.resp.Body) // read here: the sends' context ends when this returns
				first.resp.Body.Close()
				first.resp.Body = io.NopCloser(bytes.NewReader(b))
			}
			cancel()
			if loser := <-results; loser.resp != nil { // nothing outlives the request
				loser.resp.Body.Close()
			}
			if first.err != nil {
				return nil, first.err
			}
			return first.resp, nil
		})
	}}
}
