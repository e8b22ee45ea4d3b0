package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

func retry503(p *policy.Policy) {
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify
}

func TestScope(t *testing.T) {
	tests := []struct {
		name  string
		p     policy.Policy
		local bool // send to localhost instead of 127.0.0.1
		want  outcome
	}{
		{"default checks before the first retry", withScope(policy.Default(), false), false,
			outcome{Status: 503, Requests: 1, Stop: policy.StopOutOfScope, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
		{"in scope", withScope(policy.Default(), false), true,
			outcome{Status: 503, Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms}, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
		{"reqwest's quirk sends it twice", reqwestForLocalhost(), false,
			outcome{Status: 503, Requests: 2, Stop: policy.StopOutOfScope, Waits: []time.Duration{0}, Pitfalls: []Pitfall{PitfallScopeLeak, PitfallExhaustedRetryableStatus}}},
		{"reqwest in scope", reqwestForLocalhost(), true,
			outcome{Status: 503, Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{0, 0}, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.p)
			path := "/s/503"
			if tt.local {
				path = f.srv.LocalhostURL() + path
			}
			resp, rep, err := f.sendURL(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.outcome(resp, rep)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func withScope(p policy.Policy, fromSecond bool) policy.Policy {
	p.Scope = policy.Scope{Hosts: []string{"localhost"}, FromSecondRetry: fromSecond}
	return p
}

func reqwestForLocalhost() policy.Policy {
	p := presets.ReqwestForHost("localhost")
	retry503(&p)
	return p
}

// sendURL is send for a GET whose path may be a whole URL.
func (f *fixture) sendURL(ctx context.Context, path string) (*http.Response, *Report, error) {
	if strings.HasPrefix(path, "http") {
		req, _ := http.NewRequestWithContext(ctx, "GET", path+"?key="+f.t.Name(), nil)
		resp, err := f.client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		return resp, ReportOf(resp), nil
	}
	return f.send(ctx, "GET", path, "", false)
}

// One budget is shared by every request of the engine: seed 000's
// experiment, [101, 1, 1], then 4 more retries after 20 successes.
func TestBudgetSharedAcrossRequests(t *testing.T) {
	p := presets.ReqwestForHost("127.0.0.1")
	retry503(&p)
	p.MaxAttempts = 1001
	f := setup(t, p)
	var got []int
	var stops []policy.StopReason
	for range 3 {
		before := f.requests()
		resp, rep, err := f.send(context.Background(), "GET", "/s/503", "", false)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got, stops = append(got, f.requests()-before), append(stops, rep.Stop)
	}
	if diff := cmp.Diff([]int{101, 1, 1}, got); diff != "" {
		t.Errorf("requests per operation (-want +got):\n%s", diff)
	}
	for _, s := range stops {
		if s != policy.StopBudgetExhausted {
			t.Errorf("stop %s, want budget-exhausted", s)
		}
	}
	for range 20 {
		resp, _, _ := f.send(context.Background(), "GET", "/s/200", "", false)
		resp.Body.Close()
	}
	resp, rep, _ := f.send(context.Background(), "GET", "/s/503", "", false)
	resp.Body.Close()
	if len(rep.Attempts) != 5 {
		t.Errorf("after 20 successes: %d attempts, want 5", len(rep.Attempts))
	}
}

// The ways a retry layer sends, each watching the wire its own way.
const (
	outsideStack = "outside a stack"       // its own contexts
	inStack      = "in a stack"            // the stack's context, no copy
	underRetry   = "under another retry"   // its own contexts, the outer layer's trace composed
	callerTraces = "the caller traces too" // its own contexts, the caller's trace composed
)

var sendModes = []string{outsideStack, inStack, underRetry, callerTraces}

// h2cIn returns a server with faults and a client that sends through a
// retry layer under p in the given mode, and the report of that layer's
// last operation (under another retry layer, ReportOf and the errors give
// the outer layer's: the one whose answer the caller got).
func h2cIn(t *testing.T, p policy.Policy, mode string, faults ...faultserver.H2Fault) (*faultserver.H2Server, *http.Client, func() *Report) {
	t.Helper()
	srv, err := faultserver.NewH2(faultserver.H2Config{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	var last atomic.Pointer[Report]
	e, err := New(Config{Policy: p, Hooks: Hooks{OnAttempt: func(ev Event) { last.Store(ev.Report) }}})
	if err != nil {
		t.Fatal(err)
	}
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	var rt http.RoundTripper
	switch mode {
	case outsideStack:
		rt = e.Layer().Wrap(tr)
	case inStack, callerTraces:
		rt = mustStack(t, e.Layer()).Then(tr)
	case underRetry:
		outer, err := New(Config{Policy: policy.Never()})
		if err != nil {
			t.Fatal(err)
		}
		rt = mustStack(t, middleware.Layer{Name: "outer", Wrap: outer.Layer().Wrap}, e.Layer()).Then(tr)
	}
	c := &http.Client{Transport: rt}
	t.Cleanup(func() { c.CloseIdleConnections(); srv.Close() })
	return srv, c, last.Load
}

func mustStack(t *testing.T, layers ...middleware.Layer) middleware.Stack {
	t.Helper()
	s, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// net/http resends a refused stream by itself; the engine counts the resend
// as a transparent attempt and does not retry on top of it.
func TestHiddenRetriesHTTP2(t *testing.T) {
	tests := []struct {
		name        string
		p           policy.Policy
		fault       faultserver.H2Fault
		method      string
		body        io.Reader
		wantStreams int
		wantErr     bool
		want        []AttemptRecord
	}{
		{"refused GET", policy.Never(), faultserver.H2Refuse, "GET", nil, 2, false,
			[]AttemptRecord{{Status: 200, Processed: policy.Responded, Transparent: 1, Decision: policy.Stop(policy.StopSuccess)}}},
		{"refused POST with GetBody", policy.Default(), faultserver.H2Refuse, "POST", bytes.NewReader([]byte("x")), 2, false,
			[]AttemptRecord{{Status: 200, Processed: policy.Responded, Transparent: 1, Decision: policy.Stop(policy.StopSuccess)}}},
		{"GOAWAY below the stream", policy.Never(), faultserver.H2GoAway, "GET", nil, 2, false,
			[]AttemptRecord{{Status: 200, Processed: policy.Responded, Transparent: 1, Decision: policy.Stop(policy.StopSuccess)}}},
		// A streaming body is kept as it is sent, and the kept copy is the
		// request's GetBody: net/http resends the refused stream itself.
		{"refused streaming POST", policy.Default(), faultserver.H2Refuse, "POST", io.NopCloser(strings.NewReader("x")), 2, false,
			[]AttemptRecord{{Status: 200, Processed: policy.Responded, Transparent: 1, Decision: policy.Stop(policy.StopSuccess)}}},
		// net/http reports this one with an error of no exported type, so
		// it is not retried, and the attempt counts as possibly processed.
		{"GOAWAY at the stream: may be processed", policy.Default(), faultserver.H2GoAwayProcessed, "GET", nil, 1, true,
			[]AttemptRecord{{Processed: policy.SentNoResponse, Decision: policy.Stop(policy.StopNonRetryable)}}},
		// RST_STREAM(INTERNAL_ERROR) after the request arrived, as a proxy
		// sends when its upstream fails: sent, no response. A GET is
		// retried, as over HTTP/1.1; a POST without a key is not.
		{"stream reset: GET retried", policy.Default(), faultserver.H2ResetInternalError, "GET", nil, 2, false,
			[]AttemptRecord{
				{Processed: policy.SentNoResponse, Decision: policy.Retry("connection")},
				{Status: 200, Processed: policy.Responded, Resend: 1, Decision: policy.Stop(policy.StopSuccess)}}},
		{"stream reset: POST not retried", policy.Default(), faultserver.H2ResetInternalError, "POST", bytes.NewReader([]byte("x")), 1, true,
			[]AttemptRecord{{Processed: policy.SentNoResponse, Decision: policy.Stop(policy.StopNotIdempotent)}}},
	}
	for _, tt := range tests {
		for _, mode := range sendModes {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				hiddenRetryHTTP2(t, mode, tt.p, tt.fault, tt.method, tt.body, tt.wantStreams, tt.wantErr, tt.want)
			})
		}
	}
}

func hiddenRetryHTTP2(t *testing.T, mode string, p policy.Policy, fault faultserver.H2Fault, method string, body io.Reader, wantStreams int, wantErr bool, want []AttemptRecord) {
	if rs, ok := body.(io.ReadSeeker); ok {
		rs.Seek(0, io.SeekStart) // each mode sends the same body
	} else if body != nil {
		body = io.NopCloser(strings.NewReader("x"))
	}
	srv, c, inner := h2cIn(t, p, mode, fault)
	req, _ := http.NewRequest(method, srv.URL()+"/", body)
	var callerConns atomic.Int32
	if mode == callerTraces {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { callerConns.Add(1) },
		}))
	}
	resp, err := c.Do(req)
	var rep *Report
	if err != nil {
		var ee *Error
		if !errors.As(err, &ee) {
			t.Fatalf("error %v carries no report", err)
		}
		rep = ee.Report
	} else {
		resp.Body.Close()
		rep = ReportOf(resp)
	}
	if mode == underRetry {
		rep = inner()
	}
	if (err != nil) != wantErr {
		t.Errorf("error %v, want error %v", err, wantErr)
	}
	if srv.Streams() != wantStreams {
		t.Errorf("%d streams, want %d", srv.Streams(), wantStreams)
	}
	ignoreErr := cmp.Transformer("noErr", func(a AttemptRecord) AttemptRecord { a.Err = nil; return a })
	if diff := cmp.Diff(want, rep.Attempts, ignoreErr); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if mode == callerTraces {
		if got, sends := int(callerConns.Load()), len(rep.Attempts)+rep.TransparentAttempts(); got != sends {
			t.Errorf("the caller's trace saw %d connections, the report %d sends", got, sends)
		}
	}
}

// On HTTP/1.1, a GET on a reused connection that the server closes without
// a response is resent by net/http on a new connection: the server sees
// it twice, the engine one attempt with one transparent resend.
func TestHiddenRetriesHTTP1(t *testing.T) {
	f := setup(t, policy.Never())
	resp, _, err := f.send(context.Background(), "GET", "/s/200", "", false)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection goes back to the pool, to be reused
	before := f.requests()
	_, rep, err := f.send(context.Background(), "GET", "/abort", "", false)
	if err == nil {
		t.Fatal("no error")
	}
	if got := f.requests() - before; got != 2 {
		t.Errorf("server saw %d requests, want 2", got)
	}
	if len(rep.Attempts) != 1 || rep.TransparentAttempts() != 1 {
		t.Errorf("%d attempts, %d transparent; want 1 and 1", len(rep.Attempts), rep.TransparentAttempts())
	}
}
