package engine

import (
	"context"
	"errors"
	"go/version"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/sethvargo/go-retry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is virtual time: sleeps return at once and move it forward.
type clock struct {
	mu     sync.Mutex
	t      time.Time
	slept  []time.Duration
	during func() // runs inside each sleep, before it returns
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	during := c.during
	c.mu.Unlock()
	if during != nil {
		during()
	}
	return ctx.Err()
}

type fixture struct {
	t      *testing.T
	srv    *faultserver.Server
	client *http.Client
	clock  *clock
	events []string
}

// setup returns a fault server and a client whose only layer is the retry
// layer of an engine for p, on virtual time with jitter fixed at 0.5.
func setup(t *testing.T, p policy.Policy, cfg ...func(*Config)) *fixture {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, srv: srv, clock: &clock{t: time.Now()}}
	p.Rand = func() float64 { return 0.5 }
	c := Config{Policy: p, Hooks: Hooks{
		OnAttempt: func(ev Event) { f.events = append(f.events, "attempt") },
		OnRetry:   func(ev Event) { f.events = append(f.events, "retry") },
		OnGiveUp:  func(r *Report) { f.events = append(f.events, "give-up:"+string(r.Stop)) },
		OnPitfall: func(ev Event) { f.events = append(f.events, "pitfall:"+string(ev.Pitfall)) },
	}}
	for _, fn := range cfg {
		fn(&c)
	}
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.now, e.sleep = f.clock.now, f.clock.sleep
	tr := &http.Transport{}
	f.client = &http.Client{Transport: e.Layer().Wrap(tr)}
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		srv.Close()
	})
	return f
}

func (f *fixture) url(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return f.srv.URL() + path + sep + "key=" + f.t.Name()
}

// send performs one request; body "" sends none, and stream=true hides
// GetBody so the body cannot be replayed.
func (f *fixture) send(ctx context.Context, method, path, body string, stream bool, header ...string) (*http.Response, *Report, error) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		if stream {
			rd = io.NopCloser(rd)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url(path), rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		rep := ReportFrom(err)
		if rep == nil {
			f.t.Fatalf("error %v carries no report", err)
		}
		return nil, rep, err
	}
	rep := ReportOf(resp)
	if rep == nil {
		f.t.Fatal("response carries no report")
	}
	return resp, rep, nil
}

func (f *fixture) requests() int {
	// A client that gave up may leave the server still reading the request.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.srv.WaitIdle(ctx); err != nil {
		f.t.Fatalf("server never went idle: %v", err)
	}
	n := 0
	for _, e := range f.srv.Log() {
		if e.Key == f.t.Name() {
			n++
		}
	}
	return n
}

// outcome is what a test checks of an operation.
type outcome struct {
	Status   int // 0 for an error
	Requests int
	Stop     policy.StopReason
	Waits    []time.Duration
	Pitfalls []Pitfall
}

func (f *fixture) outcome(resp *http.Response, rep *Report) outcome {
	o := outcome{Requests: f.requests(), Stop: rep.Stop, Waits: rep.PlannedWaits, Pitfalls: rep.Pitfalls}
	if resp != nil {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Every route used here answers its status text: the body handed
		// back must be whole and readable.
		if want := http.StatusText(resp.StatusCode) + "\n"; err != nil || string(b) != want {
			f.t.Errorf("body %q, %v; want %q", b, err, want)
		}
		o.Status = resp.StatusCode
		o.Stop = rep.Stop // a body read may have changed it
	}
	return o
}

const ms = time.Millisecond

func TestStopReasons(t *testing.T) {
	naive := func() policy.Policy { // each row a client of its own, with its own budget
		p := policy.Default()
		p.Classify = policy.Rules{Statuses: policy.RetryableStatuses(), Errors: func(policy.ErrorKind) bool { return true }, Safe: func(*http.Request) bool { return true }}.Classify
		return p
	}
	tests := []struct {
		name           string
		p              policy.Policy
		method, path   string
		body           string
		stream         bool
		want           outcome
		wantEvents     []string
		failOnExhausts bool
		replayLimit    int64
		header         []string
	}{
		{
			name: "success after two 503s", p: policy.Default(), method: "GET", path: "/fail/2/503",
			want:       outcome{Status: 200, Requests: 3, Stop: policy.StopSuccess, Waits: []time.Duration{50 * ms, 100 * ms}},
			wantEvents: []string{"attempt", "retry", "attempt", "retry", "attempt"},
		},
		{
			name: "404 is not retried", p: policy.Default(), method: "GET", path: "/s/404",
			want:       outcome{Status: 404, Requests: 1, Stop: policy.StopNonRetryable},
			wantEvents: []string{"attempt", "give-up:non-retryable"},
		},
		{
			name: "exhausted hands back the 503", p: policy.Default(), method: "GET", path: "/s/503",
			want: outcome{Status: 503, Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms},
				Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}},
			wantEvents: []string{"attempt", "retry", "attempt", "retry", "attempt", "pitfall:exhausted-retryable-status", "give-up:attempts-exhausted"},
		},
		{
			name: "POST on 503 is sent once", p: policy.Default(), method: "POST", path: "/orders", body: "item",
			want:       outcome{Status: 503, Requests: 1, Stop: policy.StopNotIdempotent},
			wantEvents: []string{"attempt", "give-up:not-idempotent"},
		},
		{
			name: "keyed POST is retried", p: policy.Default(), method: "POST", path: "/fail/1/503", body: "item", header: []string{"Idempotency-Key", "k-1"},
			want: outcome{Status: 200, Requests: 2, Stop: policy.StopSuccess, Waits: []time.Duration{50 * ms}},
		},
		{
			name: "naive classifier sends the POST three times", p: naive(), method: "POST", path: "/orders", body: "item",
			want: outcome{Status: 503, Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms},
				Pitfalls: []Pitfall{PitfallNonIdempotentRetried, PitfallNonIdempotentRetried, PitfallExhaustedRetryableStatus}},
		},
		{
			name: "streaming body past the replay limit is not replayed", p: naive(), method: "POST", path: "/s/503", body: "item", stream: true, replayLimit: 3,
			want: outcome{Status: 503, Requests: 1, Stop: policy.StopBodyNotReplayable,
				Pitfalls: []Pitfall{PitfallBodyNotReplayable, PitfallExhaustedRetryableStatus}},
		},
		{
			name: "streaming body within the replay limit is replayed", p: naive(), method: "POST", path: "/s/503", body: "item", stream: true,
			want: outcome{Status: 503, Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms},
				Pitfalls: []Pitfall{PitfallNonIdempotentRetried, PitfallNonIdempotentRetried, PitfallExhaustedRetryableStatus}},
		},
		{
			name: "transport errors exhaust attempts", p: policy.Default(), method: "GET", path: "/abort",
			want:       outcome{Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms}},
			wantEvents: []string{"attempt", "retry", "attempt", "retry", "attempt", "give-up:attempts-exhausted"},
		},
		{
			name: "POST lost after write is not resent", p: policy.Default(), method: "POST", path: "/write?drop=1", body: "pay",
			want: outcome{Requests: 1, Stop: policy.StopNotIdempotent},
		},
		{
			name: "FailOnExhausted turns the 503 into an error", p: policy.Default(), method: "GET", path: "/s/503", failOnExhausts: true,
			want: outcome{Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.p, func(c *Config) { c.FailOnExhausted, c.ReplayLimit = tt.failOnExhausts, tt.replayLimit })
			resp, rep, err := f.send(context.Background(), tt.method, tt.path, tt.body, tt.stream, tt.header...)
			if (err != nil) != (tt.want.Status == 0) {
				t.Fatalf("error %v, want status %d", err, tt.want.Status)
			}
			if diff := cmp.Diff(tt.want, f.outcome(resp, rep)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if tt.wantEvents != nil {
				if diff := cmp.Diff(tt.wantEvents, f.events); diff != "" {
					t.Errorf("hook events (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tt.want.Waits, f.clock.slept); diff != "" {
				t.Errorf("slept (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailOnExhaustedCarriesLastResponse(t *testing.T) {
	f := setup(t, policy.Default(), func(c *Config) { c.FailOnExhausted = true })
	_, _, err := f.send(context.Background(), "GET", "/s/503?retry-after=0&size=5000", "", false)
	var xe *ExhaustedError
	if !errors.As(err, &xe) {
		t.Fatalf("error %v is not an *ExhaustedError", err)
	}
	var se *middleware.StatusError
	if !errors.As(err, &se) || se.StatusCode != 503 || len(se.Body) != 4<<10 || !se.Truncated {
		t.Errorf("last response: %+v", se)
	}
	if len(xe.Report.Attempts) != 3 || xe.Report.Stop != policy.StopAttemptsExhausted {
		t.Errorf("report: %d attempts, stop %s", len(xe.Report.Attempts), xe.Report.Stop)
	}
}

func TestRetryAfter(t *testing.T) {
	node := presets.Node()
	python := presets.Python()
	tests := []struct {
		name string
		p    policy.Policy
		path string
		want outcome
	}{
		{"node waits the larger: hint", node, "/fail/1/429?retry-after=1", outcome{Status: 200, Requests: 2, Stop: policy.StopSuccess, Waits: []time.Duration{time.Second}}},
		{"node waits the larger: backoff", node, "/fail/1/503?retry-after=0", outcome{Status: 200, Requests: 2, Stop: policy.StopSuccess, Waits: []time.Duration{25 * ms}}},
		{"python's hint overrides", python, "/fail/2/503?retry-after=0.2", outcome{Status: 200, Requests: 3, Stop: policy.StopSuccess, Waits: []time.Duration{200 * ms, 200 * ms}}},
		{"node refuses fractions", node, "/s/503?retry-after=1.5", outcome{Status: 503, Requests: 1, Stop: policy.StopUnsupportedRetryAfter, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
		{"hint beyond the deadline", node, "/s/503?retry-after=60", outcome{Status: 503, Requests: 1, Stop: policy.StopWaitExceedsBudget, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
		{"hint beyond Max", policy.Default(), "/s/503?retry-after=61", outcome{Status: 503, Requests: 1, Stop: policy.StopWaitExceedsBudget, Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}},
		{"garbage hint is ignored", policy.Default(), "/fail/1/503?retry-after=soon", outcome{Status: 200, Requests: 2, Stop: policy.StopSuccess, Waits: []time.Duration{50 * ms}, Pitfalls: []Pitfall{PitfallRetryAfterIgnored}}},
		{"date hint", policy.Default(), "/fail/1/503?retry-after-in=30s", outcome{Status: 200, Requests: 2, Stop: policy.StopSuccess}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.p)
			resp, rep, err := f.send(context.Background(), "GET", tt.path, "", false)
			if err != nil {
				t.Fatal(err)
			}
			got := f.outcome(resp, rep)
			if tt.name == "date hint" {
				// An HTTP-date has one-second resolution and the server's
				// clock is real: the wait is within a second of 30 s.
				if len(got.Waits) != 1 || got.Waits[0] <= 28*time.Second || got.Waits[0] > 30*time.Second {
					t.Errorf("waits %v, want about 30s", got.Waits)
				}
				got.Waits = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTime(t *testing.T) {
	t.Run("attempt timeout not retried", func(t *testing.T) {
		p := presets.Node()
		p.AttemptTimeout = 20 * ms
		f := setup(t, p)
		_, rep, err := f.send(context.Background(), "GET", "/slow/headers?delay=1h", "", false)
		var ee *Error
		if !errors.As(err, &ee) || !ee.Timeout() {
			t.Fatalf("error %v, want an *Error that is a timeout", err)
		}
		if diff := cmp.Diff(outcome{Requests: 1, Stop: policy.StopAttemptTimeout}, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("attempt timeout retried", func(t *testing.T) {
		p := policy.Default()
		p.AttemptTimeout = 20 * ms
		p.Budget = nil // Default's pays for a timeout's retry only from the last second's successes (TestTimeoutRetryNeedsRecentSuccesses)
		f := setup(t, p)
		_, rep, err := f.send(context.Background(), "GET", "/slow/headers?delay=1h", "", false)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want deadline exceeded", err)
		}
		want := outcome{Requests: 3, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{50 * ms, 100 * ms}}
		if diff := cmp.Diff(want, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("total deadline", func(t *testing.T) {
		p := policy.Default()
		p.Timeout = 20 * ms
		f := setup(t, p)
		_, rep, err := f.send(context.Background(), "GET", "/slow/headers?delay=1h", "", false)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want deadline exceeded", err)
		}
		if diff := cmp.Diff(outcome{Requests: 1, Stop: policy.StopDeadline}, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		f := setup(t, policy.Default())
		ctx, cancel := context.WithTimeout(context.Background(), 20*ms)
		defer cancel()
		_, rep, _ := f.send(ctx, "GET", "/slow/headers?delay=1h", "", false)
		if diff := cmp.Diff(outcome{Requests: 1, Stop: policy.StopDeadline}, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		attempt time.Duration
		caller  time.Duration // the caller's own deadline, when not 0
		want    policy.StopReason
	}{
		{"slow body, attempt timeout", 0, 100 * ms, 0, policy.StopAttemptTimeout},
		{"slow body, total deadline", 100 * ms, 0, 0, policy.StopDeadline},
		{"slow body, caller's deadline", 0, 0, 100 * ms, policy.StopDeadline},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := presets.Node()
			p.Timeout, p.AttemptTimeout = tt.timeout, tt.attempt
			f := setup(t, p)
			ctx := context.Background()
			if tt.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.caller)
				defer cancel()
			}
			resp, rep, err := f.send(ctx, "GET", "/slow/body?delay=1h", "", false)
			if err != nil {
				t.Fatalf("headers: %v", err)
			}
			if rep.Stop != policy.StopSuccess {
				t.Errorf("stop before the body is read: %s", rep.Stop)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			var ee *Error
			if !errors.As(err, &ee) || ee.Report != rep {
				t.Errorf("body read error %v does not carry the report", err)
			}
			if rep.Stop != tt.want {
				t.Errorf("stop after the body read: %s, want %s", rep.Stop, tt.want)
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	t.Run("before the call", func(t *testing.T) {
		f := setup(t, policy.Default())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := &closeTracker{Reader: strings.NewReader("x")}
		req, _ := http.NewRequestWithContext(ctx, "POST", f.url("/s/200"), body)
		_, err := f.client.Do(req)
		var ee *Error
		if !errors.As(err, &ee) || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if diff := cmp.Diff(outcome{Stop: policy.StopCancelled}, f.outcome(nil, ee.Report)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if !body.closed {
			t.Error("request body left open")
		}
	})
	t.Run("before the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := setup(t, policy.Default(), func(c *Config) { c.Hooks.OnRetry = func(Event) { cancel() } })
		_, rep, err := f.send(ctx, "GET", "/s/503", "", false)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		want := outcome{Requests: 1, Stop: policy.StopCancelled, Waits: []time.Duration{50 * ms}}
		if diff := cmp.Diff(want, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("during the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := setup(t, policy.Default())
		f.clock.during = cancel
		_, rep, err := f.send(ctx, "GET", "/s/503", "", false)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		want := outcome{Requests: 1, Stop: policy.StopCancelled, Waits: []time.Duration{50 * ms}}
		if diff := cmp.Diff(want, f.outcome(nil, rep)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

// Discarded bodies are drained so the connection is reused, unless they are
// longer than the drain limit: then they are closed unread, and on Go 1.26
// the connection is not reused. From Go 1.27, net/http's own Close drains
// a body (up to 256 KiB, for 50 ms) on the connection's goroutine, so
// whether the next attempt finds the connection back in the pool is a
// race: the long row is checked on Go 1.26 only.
func TestDiscardedBodies(t *testing.T) {
	stdlibDrains := version.Compare(runtime.Version(), "go1.27") >= 0
	for _, tt := range []struct {
		size       int
		wantReused []bool
	}{
		{100, []bool{false, true, true}},
		{wire.DrainLimit * 4, []bool{false, false, false}},
	} {
		f := setup(t, policy.Default())
		var reused []bool
		var mu sync.Mutex
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			reused = append(reused, i.Reused)
			mu.Unlock()
		}})
		resp, rep, err := f.send(ctx, "GET", "/fail/2/503?size="+strconv.Itoa(tt.size), "", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Attempts) != 3 {
			t.Fatalf("size %d: %d attempts", tt.size, len(rep.Attempts))
		}
		resp.Body.Close()
		mu.Lock()
		if tt.size > wire.DrainLimit && stdlibDrains {
			reused = reused[:min(1, len(reused))] // the first attempt dials; the others race the stdlib's drain
			tt.wantReused = tt.wantReused[:1]
		}
		if diff := cmp.Diff(tt.wantReused, reused); diff != "" {
			t.Errorf("size %d: connection reused (-want +got):\n%s", tt.size, diff)
		}
		mu.Unlock()
	}
}

func TestProcessedState(t *testing.T) {
	f := setup(t, policy.Default())
	_, rep, _ := f.send(context.Background(), "GET", "/abort", "", false)
	for _, a := range rep.Attempts {
		if a.Processed != policy.SentNoResponse {
			t.Errorf("abort: processed %v, want sent-no-response", a.Processed)
		}
	}
	resp, rep, err := f.send(context.Background(), "GET", "/s/200", "", false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rep.Attempts[0].Processed; got != policy.Responded {
		t.Errorf("200: processed %v", got)
	}
	// Nothing listens: the dial fails before anything is written. The idle
	// connection of the 200 goes first: written to before the client sees
	// the server closed it, it would make the POST sent-no-response (Go
	// 1.27 reuses it that way about every other run).
	closed := f.srv.URL()
	f.srv.Close()
	f.client.CloseIdleConnections()
	req, _ := http.NewRequest("POST", closed+"/orders", strings.NewReader("x"))
	_, err = f.client.Do(req)
	var ee *Error
	if !errors.As(err, &ee) {
		t.Fatalf("error %v", err)
	}
	if got := ee.Report.Attempts[0].Processed; got != policy.NotSent {
		t.Errorf("refused: processed %v, want not-sent", got)
	}
	if got := len(ee.Report.Attempts); got != 3 {
		t.Errorf("a POST that was never sent is retried: %d attempts, want 3", got)
	}
}

// The retry layer keeps the contract under every configuration that
// changes its paths: deadlines (its body wrapper), FailOnExhausted (it
// reads the last body), and a Prepare that signs each attempt's query and
// headers, or fails.
func TestLayerContract(t *testing.T) {
	sign := func(req *http.Request, n int) error {
		q := req.URL.Query()
		q.Add("sig", strconv.Itoa(n))
		req.URL.RawQuery = q.Encode()
		req.Header.Set("Authorization", "token-"+strconv.Itoa(n))
		return nil
	}
	refuse := func(*http.Request, int) error { return errors.New("no credentials") }
	timed := policy.Default()
	timed.Timeout, timed.AttemptTimeout = time.Hour, time.Minute
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{Policy: policy.Default()}},
		{"deadlines", Config{Policy: timed}},
		{"fail-on-exhausted", Config{Policy: policy.Default(), FailOnExhausted: true}},
		{"prepare", Config{Policy: policy.Default(), Prepare: sign}},
		{"prepare-fails", Config{Policy: policy.Default(), Prepare: refuse}},
		// Routes: every request the contract sends matches one, whose
		// policy reads rate-limit hints; and renamed cross-layer signals.
		{"routes", Config{Policy: policy.Never(), Routes: []Route{{Name: "all", PathPrefix: "/", Policy: policy.Default()}}}},
		{"signals", Config{Policy: timed, Signals: crosslayer.Signals{Attempt: "X-Try", Timeout: "X-Deadline-Ms"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
			rttest.Contract(t, e.Layer().Wrap)
		})
	}
}

func TestNewRejectsBadPolicy(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = -1
	_, err := New(Config{Policy: p})
	var ce *policy.ConfigError
	if !errors.As(err, &ce) || ce.Field != "engine.Config.Policy.MaxAttempts" {
		t.Errorf("New: %v, want a *policy.ConfigError for MaxAttempts", err)
	}
}

// The README's stack: error-for-status above retry. The status error still
// leads to the report.
func TestReportFromStatusError(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	e, _ := New(Config{Policy: policy.Default()})
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	stack, err := middleware.NewStack(middleware.ErrorForStatus(0), e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: stack.Then(tr)}).Get(srv.URL() + "/s/503")
	rep := ReportFrom(err)
	if rep == nil || len(rep.Attempts) != 3 || rep.Stop != policy.StopAttemptsExhausted {
		t.Errorf("ReportFrom(%v) = %+v", err, rep)
	}
	if ReportFrom(errors.New("other")) != nil {
		t.Error("a plain error has a report")
	}
}

// The budget pays only for a retry that is sent: a retry refused because
// its wait would not fit (a hint past RetryAfter.Max, a wait past the
// deadline) leaves the budget as it was.
func TestBudgetSpentOnlyOnSentRetries(t *testing.T) {
	for _, path := range []string{"/s/503?retry-after=61", "/s/503?retry-after=30"} {
		p := policy.Default()
		p.Timeout = 10 * time.Second // the 30 s hint does not fit
		budget := presets.Budget(10*time.Second, 1, 0.2)
		p.Budget = budget
		before := budget.(interface{ Retries() int }).Retries()
		f := setup(t, p)
		resp, rep, err := f.send(context.Background(), "GET", path, "", false)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rep.Stop != policy.StopWaitExceedsBudget {
			t.Fatalf("%s: stop %s", path, rep.Stop)
		}
		if after := budget.(interface{ Retries() int }).Retries(); after != before {
			t.Errorf("%s: budget %d retries before, %d after a retry that was never sent", path, before, after)
		}
	}
}

// A go-retry backoff of the user's shapes the waits and, when it stops,
// ends the retries as attempts-exhausted.
func TestBackoffMake(t *testing.T) {
	p := policy.Default()
	p.MaxAttempts = 5
	p.Backoff = policy.Backoff{Make: func() retry.Backoff {
		return retry.WithMaxRetries(1, retry.NewConstant(7*ms))
	}}
	f := setup(t, p)
	resp, rep, err := f.send(context.Background(), "GET", "/s/503", "", false)
	if err != nil {
		t.Fatal(err)
	}
	want := outcome{Status: 503, Requests: 2, Stop: policy.StopAttemptsExhausted, Waits: []time.Duration{7 * ms},
		Pitfalls: []Pitfall{PitfallExhaustedRetryableStatus}}
	if diff := cmp.Diff(want, f.outcome(resp, rep)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
