package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// recorder is a server that answers with the statuses of its script (the
// last one repeated) and records the cross-layer headers it received.
type recorder struct {
	mu       sync.Mutex
	script   []int
	header   http.Header // added to every answer
	attempts []string
	timeouts []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.attempts = append(rec.attempts, r.Header.Get("Retrystack-Attempt"))
	rec.timeouts = append(rec.timeouts, r.Header.Get("Retrystack-Timeout-Ms"))
	code := rec.script[min(len(rec.attempts), len(rec.script))-1]
	rec.mu.Unlock()
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
}

// crossClient is a client of a service in a chain: it speaks the
// protocol with every host unless cfg.Signals says otherwise.
func crossClient(t *testing.T, cfg Config, h http.Handler) (*http.Client, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	if cfg.Signals.To == nil {
		cfg.Signals.To = &policy.Scope{}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	s, err := middleware.NewStack(e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: s.Then(tr)}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	return c, srv.URL
}

// Each retry says which attempt it is; under a deadline each attempt says
// how long is left; the first attempt without a deadline carries nothing.
func TestOutboundHeaders(t *testing.T) {
	rec := &recorder{script: []int{503, 503, 200}}
	c, url := crossClient(t, Config{Policy: policy.Default()}, rec)
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]string{"", "2; max=3", "3; max=3"}, rec.attempts); diff != "" {
		t.Errorf("attempt headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "", ""}, rec.timeouts); diff != "" {
		t.Errorf("timeout headers without a deadline (-want +got):\n%s", diff)
	}

	rec = &recorder{script: []int{200}}
	c, url = crossClient(t, Config{Policy: policy.Default()}, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("X-Caller", "kept")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ms, err := strconv.Atoi(rec.timeouts[0])
	if err != nil || ms <= 0 || ms > 5000 {
		t.Errorf("timeout header %q, want 1..5000 ms", rec.timeouts[0])
	}
	if req.Header.Get("Retrystack-Timeout-Ms") != "" || len(req.Header) != 1 {
		t.Errorf("the caller's request changed: %v", req.Header)
	}

	rec = &recorder{script: []int{503, 200}}
	c, url = crossClient(t, Config{Policy: policy.Default(), Signals: crosslayer.Signals{Off: true}}, rec)
	req, _ = http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]string{"", ""}, rec.attempts); diff != "" || rec.timeouts[0] != "" {
		t.Errorf("with Off: attempts %q, timeouts %q", rec.attempts, rec.timeouts)
	}
}

// A response that says not to retry stops the operation, whatever the
// classifier says, with the reason pushback and the response unchanged.
func TestPushbackStops(t *testing.T) {
	rec := &recorder{script: []int{503}, header: http.Header{"Retrystack-Should-Retry": {"false"}, "Retry-After": {"7"}}}
	c, url := crossClient(t, Config{Policy: policy.Default()}, rec)
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rep := ReportOf(resp)
	if len(rec.attempts) != 1 || rep.Stop != policy.StopPushback || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("%d requests, stop %s, status %d, Retry-After %q; want 1, pushback, 503, 7", len(rec.attempts), rep.Stop, resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// A layer that does not speak the protocol retries as before.
	rec = &recorder{script: []int{503}, header: http.Header{"Retrystack-Should-Retry": {"false"}}}
	c, url = crossClient(t, Config{Policy: policy.Default(), Signals: crosslayer.Signals{Off: true}}, rec)
	resp, err = c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(rec.attempts) != 3 {
		t.Errorf("with Off: %d requests, want 3", len(rec.attempts))
	}
}

// The protocol is spoken only with the hosts Signals.To names: to any
// other (a third party: S3, Stripe) no Retrystack-* header is sent, under
// a deadline neither, and its "do not retry" is not obeyed.
func TestSignalsOnlyToNamedHosts(t *testing.T) {
	for _, c := range []struct {
		name      string
		to        *policy.Scope
		requests  int
		sendsSome bool
	}{
		{"no host named (the default)", nil, 3, false},
		{"another host named", &policy.Scope{Hosts: []string{"s1.internal"}}, 3, false},
		{"this host named", &policy.Scope{Hosts: []string{"127.0.0.1"}}, 1, true},
		{"every host", &policy.Scope{}, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy.Default() // a client of its own, with its own budget
			p.Timeout = time.Minute
			rec := &recorder{script: []int{503}, header: http.Header{"Retrystack-Should-Retry": {"false"}}}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			e, err := New(Config{Policy: p, Signals: crosslayer.Signals{To: c.to}})
			if err != nil {
				t.Fatal(err)
			}
			e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: mustStack(t, e.Layer()).Then(tr)}
			resp, err := cl.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			sent := false
			for i := range rec.attempts {
				sent = sent || rec.attempts[i] != "" || rec.timeouts[i] != ""
			}
			if len(rec.attempts) != c.requests || sent != c.sendsSome {
				t.Errorf("%d requests, headers sent %v (attempts %q, time left %q); want %d, %v", len(rec.attempts), sent, rec.attempts, rec.timeouts, c.requests, c.sendsSome)
			}
		})
	}
}

// A retry layer serving an inbound request tells it to push back when it
// gave up after retrying, never when it succeeded or did not retry.
func TestInboundPushback(t *testing.T) {
	tests := []struct {
		name   string
		script []int
		want   bool
	}{
		{"attempts exhausted", []int{503}, true},
		{"success after retries", []int{503, 200}, false},
		{"not retryable", []int{404}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := serve(t, Config{Policy: policy.Default()}, &recorder{script: tt.script})
			if st.PushedBack() != tt.want {
				t.Errorf("pushed back %v, want %v", st.PushedBack(), tt.want)
			}
		})
	}
}

// Each request runs under the policy of its route; WithRoute overrides the
// rules; the others run under Policy.
func TestRoutes(t *testing.T) {
	never := policy.Never()
	never.Name = "payments"
	// Routing is the subject, not the budget: each route retries every time.
	search := policy.Default()
	search.Name, search.Budget = "search", nil
	def := policy.Default()
	def.Budget = nil
	rec := &recorder{script: []int{503}}
	c, url := crossClient(t, Config{Policy: def, Routes: []Route{
		{PathPrefix: "/nowhere/", Policy: never}, // unnamed
		{Name: "payments", PathPrefix: "/payments/", Policy: never},
		{Name: "search", PathPrefix: "/search/", Method: "GET", Policy: search},
	}}, rec)
	tests := []struct {
		path, route string
		wantPolicy  string
		wantSends   int
	}{
		{"/payments/charge", "-", "payments", 1},
		{"/search/q", "-", "search", 3},
		{"/other", "-", "default", 3},
		{"/search/q", "payments", "payments", 1},
		{"/other", "no-such-route", "default", 3},
		{"/other", "", "default", 3}, // WithRoute(ctx, "") picks no route, not an unnamed one
	}
	for _, tt := range tests {
		before := len(rec.attempts)
		ctx := context.Background()
		if tt.route != "-" {
			ctx = WithRoute(ctx, tt.route)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", url+tt.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		rep := ReportOf(resp)
		if got := len(rec.attempts) - before; rep.Policy != tt.wantPolicy || got != tt.wantSends {
			t.Errorf("%s (route %q): policy %s, %d sends; want %s, %d", tt.path, tt.route, rep.Policy, got, tt.wantPolicy, tt.wantSends)
		}
	}
}

func TestRoutesAreValidated(t *testing.T) {
	_, err := New(Config{Policy: policy.Default(), Routes: []Route{{Name: "a", Policy: policy.Policy{}}}})
	if ce, ok := err.(*policy.ConfigError); !ok || ce.Field != "engine.Config.Routes[0].Policy.MaxAttempts" {
		t.Errorf("zero route policy: %v", err)
	}
	_, err = New(Config{Policy: policy.Default(), Routes: []Route{{Name: "a", Policy: policy.Default()}, {Name: "a", Policy: policy.Default()}}})
	if ce, ok := err.(*policy.ConfigError); !ok || ce.Field != "engine.Config.Routes[1].Name" {
		t.Errorf("duplicate route name: %v", err)
	}
}

// Pushback does not hide the Ok(503) trap: with FailOnExhausted the 503 is
// an *ExhaustedError, as when attempts run out.
func TestPushbackWithFailOnExhausted(t *testing.T) {
	rec := &recorder{script: []int{503}, header: http.Header{"Retrystack-Should-Retry": {"false"}}}
	c, url := crossClient(t, Config{Policy: policy.Default(), FailOnExhausted: true}, rec)
	_, err := c.Get(url)
	var xe *ExhaustedError
	if !errors.As(err, &xe) || xe.Report.Stop != policy.StopPushback {
		t.Errorf("error %v, want an *ExhaustedError with stop pushback", err)
	}
}

// A layer that did not retry leaves the choice to its caller.
func TestNoPushbackWithoutRetrying(t *testing.T) {
	one := policy.Default()
	one.MaxAttempts = 1
	for name, tc := range map[string]struct {
		p      policy.Policy
		header http.Header
	}{
		"one attempt allowed": {one, nil},
		"a hint too long":     {policy.Default(), http.Header{"Retry-After": {"120"}}},
	} {
		st, rep := serve(t, Config{Policy: tc.p}, &recorder{script: []int{503}, header: tc.header})
		if st.PushedBack() {
			t.Errorf("%s: pushed back (stop %s)", name, rep.Stop)
		}
	}
}

// A request forwarded with a caller's headers (a proxy without Handler)
// carries this layer's values, never the caller's.
func TestStaleInboundHeadersAreReplaced(t *testing.T) {
	rec := &recorder{script: []int{200}}
	c, url := crossClient(t, Config{Policy: policy.Default()}, rec)
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Retrystack-Attempt", "3; max=3")
	req.Header.Set("Retrystack-Timeout-Ms", "50")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rec.attempts[0] != "" || rec.timeouts[0] != "" {
		t.Errorf("sent attempt %q, timeout %q; want neither", rec.attempts[0], rec.timeouts[0])
	}
	if req.Header.Get("Retrystack-Attempt") == "" {
		t.Error("the caller's request changed")
	}
}

func TestRouteFieldsAreChecked(t *testing.T) {
	for _, r := range []Route{{PathPrefix: "payments/", Policy: policy.Default()}, {Method: "get", Policy: policy.Default()}} {
		if _, err := New(Config{Policy: policy.Default(), Routes: []Route{r}}); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// An answer that arrives once the caller has given up (its deadline
// passed, or it cancelled) is no answer: the body could not be read, and
// the operation ends with the context's error, the response released.
func TestAnswerAfterTheCallerGaveUp(t *testing.T) {
	e, err := New(Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	body := &lateBody{}
	base := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		cancel() // the caller gives up while the answer is on its way
		return &http.Response{StatusCode: 200, Body: body, Header: http.Header{}, Request: req}, nil
	})
	s, _ := middleware.NewStack(e.Layer())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc.test/", nil)
	_, err = s.Then(base).RoundTrip(req)
	rep := ReportFrom(err)
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Stop != policy.StopCancelled || !body.closed.Load() {
		t.Errorf("error %v, report %v, body closed %v; want cancelled, the body closed", err, rep, body.closed.Load())
	}
}

type lateBody struct{ closed atomic.Bool }

func (c *lateBody) Read([]byte) (int, error) { return 0, io.EOF }
func (c *lateBody) Close() error             { c.closed.Store(true); return nil }

// serve sends one GET to h as a retry layer serving an inbound request
// does, and returns the inbound state and the report.
func serve(t *testing.T, cfg Config, h http.Handler) (*inbound.State, *Report) {
	t.Helper()
	c, url := crossClient(t, cfg, h)
	st := &inbound.State{Attempt: 1}
	req, _ := http.NewRequestWithContext(inbound.With(context.Background(), st), "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return st, ReportOf(resp)
}
