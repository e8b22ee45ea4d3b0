package chaos_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bad values, and a layer whose faults can never fire, are configuration
// errors naming the field.
func TestConfigErrors(t *testing.T) {
	reset := chaos.Fault{Kind: chaos.Reset, Rate: 1}
	with := func(f func(*chaos.Fault)) chaos.Config {
		x := reset
		f(&x)
		return chaos.Config{Faults: []chaos.Fault{x}}
	}
	for _, tc := range []struct {
		cfg   chaos.Config
		field string
	}{
		{chaos.Config{}, "chaos.Config.Faults"},
		{chaos.Config{Seed: 7}, "chaos.Config.Faults"},
		{chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Reset}}}, "chaos.Config.Faults"},
		{with(func(f *chaos.Fault) { f.Kind = 0 }), "chaos.Config.Faults[0].Kind"},
		{with(func(f *chaos.Fault) { f.Kind = 99 }), "chaos.Config.Faults[0].Kind"},
		{with(func(f *chaos.Fault) { f.Rate = -0.1 }), "chaos.Config.Faults[0].Rate"},
		{with(func(f *chaos.Fault) { f.Rate = 1.5 }), "chaos.Config.Faults[0].Rate"},
		{with(func(f *chaos.Fault) { f.Rate = math.NaN() }), "chaos.Config.Faults[0].Rate"},
		{with(func(f *chaos.Fault) { f.Attempts = -1 }), "chaos.Config.Faults[0].Attempts"},
		{with(func(f *chaos.Fault) { f.Kind, f.Delay = chaos.Latency, -time.Second }), "chaos.Config.Faults[0].Delay"},
		{with(func(f *chaos.Fault) { f.Kind, f.Delay, f.Jitter = chaos.Latency, time.Second, -1 }), "chaos.Config.Faults[0].Jitter"},
		{with(func(f *chaos.Fault) { f.Kind = chaos.Latency }), "chaos.Config.Faults[0].Delay"},
		{with(func(f *chaos.Fault) { f.Kind = chaos.Status }), "chaos.Config.Faults[0].Status"},
		{with(func(f *chaos.Fault) { f.Kind, f.Status = chaos.Status, 99 }), "chaos.Config.Faults[0].Status"},
		{with(func(f *chaos.Fault) { f.Kind, f.Status = chaos.Status, 600 }), "chaos.Config.Faults[0].Status"},
		{with(func(f *chaos.Fault) { f.Status = 503 }), "chaos.Config.Faults[0].Status"},
		{with(func(f *chaos.Fault) { f.Header = http.Header{"Retry-After": {"1"}} }), "chaos.Config.Faults[0].Header"},
		{with(func(f *chaos.Fault) { f.Delay = time.Second }), "chaos.Config.Faults[0].Delay"},
		{with(func(f *chaos.Fault) { f.After = 10 }), "chaos.Config.Faults[0].After"},
		{with(func(f *chaos.Fault) { f.Kind, f.After = chaos.CutBody, -1 }), "chaos.Config.Faults[0].After"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{"API.example.com"} }), "chaos.Config.Faults[0].Hosts[0]"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{"https://api.example.com"} }), "chaos.Config.Faults[0].Hosts[0]"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{""} }), "chaos.Config.Faults[0].Hosts[0]"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{"api.example.com:"} }), "chaos.Config.Faults[0].Hosts[0]"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{"a.example", "api.example.com:https"} }), "chaos.Config.Faults[0].Hosts[1]"},
		{with(func(f *chaos.Fault) { f.Hosts = []string{":8080"} }), "chaos.Config.Faults[0].Hosts[0]"},
		{with(func(f *chaos.Fault) { f.Methods = []string{"GET", "post"} }), "chaos.Config.Faults[0].Methods[1]"},
		{with(func(f *chaos.Fault) { f.Methods = []string{""} }), "chaos.Config.Faults[0].Methods[0]"},
		{with(func(f *chaos.Fault) { f.Paths = []string{"orders"} }), "chaos.Config.Faults[0].Paths[0]"},
		{chaos.Config{Faults: []chaos.Fault{reset}, Header: "bad header"}, "chaos.Config.Header"},
	} {
		_, err := middleware.NewStack(chaos.Layer(tc.cfg))
		ce, ok := errors.AsType[*policy.ConfigError](err)
		if !ok || ce.Field != tc.field {
			t.Errorf("%+v: %v; want a *policy.ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
	ok := []chaos.Config{
		{Faults: []chaos.Fault{reset}},
		{Faults: []chaos.Fault{{Kind: chaos.Reset}}, Header: "X-Chaos"}, // only by header
		{Faults: []chaos.Fault{{Kind: chaos.Status, Rate: 0.5, Status: 429, Header: http.Header{"Ratelimit": {`"default";r=0;t=1`}}}}},
		{Faults: []chaos.Fault{{Kind: chaos.Latency, Rate: 1, Jitter: time.Millisecond, Hosts: []string{"api.example.com:8443"}, Methods: []string{"GET"}, Paths: []string{"/"}}}},
	}
	for _, cfg := range ok {
		if _, err := middleware.NewStack(chaos.Layer(cfg)); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// ok is a base transport that answers 200 "hello world" and counts.
type okBase struct{ sent atomic.Int32 }

func (b *okBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("hello world")), ContentLength: 11, Request: req}, nil
}

func do(rt http.RoundTripper, method, url string, header ...string) (int, error) {
	req, _ := http.NewRequest(method, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The same seed and the same requests in order get the same faults;
// another seed, others; the rate is what was asked.
func TestSeedRepeats(t *testing.T) {
	pattern := func(seed uint64) string {
		rt := chaos.Layer(chaos.Config{Seed: seed, Faults: []chaos.Fault{{Kind: chaos.Status, Status: 503, Rate: 0.3}}}).Wrap(&okBase{})
		var b strings.Builder
		for range 1000 {
			st, _ := do(rt, "GET", "http://a.example/")
			b.WriteByte("x."[map[int]int{503: 0, 200: 1}[st]])
		}
		return b.String()
	}
	a, b, c := pattern(42), pattern(42), pattern(43)
	if a != b {
		t.Fatal("the same seed gave other faults")
	}
	if a == c {
		t.Fatal("another seed gave the same faults")
	}
	if n := strings.Count(a, "x"); n < 240 || n > 360 {
		t.Fatalf("%d of 1000 injected at rate 0.3", n)
	}
}

// A fault hits only the requests in its scope.
func TestScope(t *testing.T) {
	f := chaos.Fault{Kind: chaos.Status, Status: 503, Rate: 1, Hosts: []string{"api.example.com"}, Methods: []string{"GET"}, Paths: []string{"/v1/"}}
	rt := chaos.Layer(chaos.Config{Faults: []chaos.Fault{f}}).Wrap(&okBase{})
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"GET", "http://api.example.com/v1/x", 503},
		{"GET", "http://API.example.com:80/v1/x", 503},
		{"GET", "http://api.example.com:8080/v1/x", 503}, // a host without a port: any port
		{"GET", "http://other.example.com/v1/x", 200},
		{"POST", "http://api.example.com/v1/x", 200},
		{"GET", "http://api.example.com/v2/x", 200},
	} {
		if st, err := do(rt, tc.method, tc.url); st != tc.want {
			t.Errorf("%s %s: %d %v; want %d", tc.method, tc.url, st, err, tc.want)
		}
	}
	// A host with a port matches on that port only, the scheme's default
	// when the URL names none.
	f = chaos.Fault{Kind: chaos.Status, Status: 503, Rate: 1, Hosts: []string{"api.example.com:443", "[::1]:8080", "10.0.0.1"}}
	rt = chaos.Layer(chaos.Config{Faults: []chaos.Fault{f}}).Wrap(&okBase{})
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"GET", "https://api.example.com/", 503},
		{"GET", "https://api.example.com:443/", 503},
		{"GET", "http://api.example.com/", 200},
		{"GET", "https://api.example.com:8443/", 200},
		{"GET", "http://[::1]:8080/", 503},
		{"GET", "http://[::1]:8081/", 200},
		{"GET", "http://10.0.0.1:9999/", 503},
	} {
		if st, err := do(rt, tc.method, tc.url); st != tc.want {
			t.Errorf("%s %s: %d %v; want %d", tc.method, tc.url, st, err, tc.want)
		}
	}
	// The host as net/http dials it, as the breaker, the throttle and
	// pacing key theirs: an internationalised name matches its punycode,
	// in any case.
	f = chaos.Fault{Kind: chaos.Status, Status: 503, Rate: 1, Hosts: []string{"bücher.example", "xn--caf-dma.example:8443"}}
	rt = chaos.Layer(chaos.Config{Faults: []chaos.Fault{f}}).Wrap(&okBase{})
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"GET", "http://BÜCHER.example/", 503},
		{"GET", "https://xn--bcher-kva.example:8443/", 503},
		{"GET", "https://café.example:8443/", 503},
		{"GET", "https://café.example/", 200},
		{"GET", "http://bucher.example/", 200},
	} {
		if st, err := do(rt, tc.method, tc.url); st != tc.want {
			t.Errorf("%s %s: %d %v; want %d", tc.method, tc.url, st, err, tc.want)
		}
	}
}

// A header asks for the faults of the kinds it names, of those the
// Config has, whatever their rate; without Header set, it asks nothing.
func TestHeaderAsks(t *testing.T) {
	faults := []chaos.Fault{{Kind: chaos.Reset}, {Kind: chaos.Status, Status: 429, Rate: 0}}
	base := &okBase{}
	rt := chaos.Layer(chaos.Config{Faults: faults, Header: "x-chaos"}).Wrap(base)
	if _, err := do(rt, "GET", "http://a.example/", "X-Chaos", "latency, reset"); !errors.Is(err, syscall.ECONNRESET) || base.sent.Load() != 1 {
		t.Errorf("asked for a reset: %v, %d sent", err, base.sent.Load())
	}
	if st, err := do(rt, "GET", "http://a.example/", "X-Chaos", "status"); st != 429 || err != nil {
		t.Errorf("asked for a status: %d %v", st, err)
	}
	if st, err := do(rt, "GET", "http://a.example/", "X-Chaos", "refuse"); st != 200 || err != nil {
		t.Errorf("asked for a fault the Config lacks: %d %v", st, err)
	}
	if st, err := do(rt, "GET", "http://a.example/"); st != 200 || err != nil {
		t.Errorf("asked for nothing: %d %v", st, err)
	}
	// Off by default: the same header on a layer without Header.
	rt = chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Status, Status: 429, Rate: 0, Methods: []string{"POST"}}, {Kind: chaos.Reset, Rate: 1, Methods: []string{"PUT"}}}}).Wrap(&okBase{})
	if st, err := do(rt, "GET", "http://a.example/", "X-Chaos", "status"); st != 200 || err != nil {
		t.Errorf("a layer without Header obeyed one: %d %v", st, err)
	}
}

// Bodies cut short or stalled after After bytes.
func TestBodies(t *testing.T) {
	rt := chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.CutBody, Rate: 1, After: 5}}}).Wrap(&okBase{})
	req, _ := http.NewRequest("GET", "http://a.example/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "chaos: injected") {
		t.Errorf("cut: %q, %v", b, err)
	}

	rt = chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.StallBody, Rate: 1, After: 5}}}).Wrap(&okBase{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", "http://a.example/", nil)
	resp, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "hello" {
		t.Fatalf("stall: the first bytes: %q %v", head, err)
	}
	got := make(chan error, 1)
	go func() { _, err := resp.Body.Read(make([]byte, 10)); got <- err }()
	cancel() // the read stalls until the context ends, whenever that is
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("stall: %v; want the context's end", err)
	}
	resp.Body.Close()
}

// A latency fault waits at least its delay, or until the context ends.
func TestLatency(t *testing.T) {
	rt := chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Latency, Rate: 1, Delay: 20 * time.Millisecond, Jitter: time.Millisecond}}}).Wrap(&okBase{})
	start := time.Now()
	if st, err := do(rt, "GET", "http://a.example/"); st != 200 || err != nil || time.Since(start) < 20*time.Millisecond {
		t.Errorf("%d %v after %v", st, err, time.Since(start))
	}
	base := &okBase{}
	rt = chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Latency, Rate: 1, Delay: time.Hour}}}).Wrap(base)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://a.example/", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) || base.sent.Load() != 0 {
		t.Errorf("cancelled in a latency: %v, %d sent", err, base.sent.Load())
	}
}

// recorder is a layer that records each operation's events.
type recorder struct {
	mu     sync.Mutex
	events []middleware.Event
}

func (r *recorder) Observe(e middleware.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) layer() middleware.Layer {
	return middleware.Layer{Name: "record", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if op, ok := middleware.OperationOf(req.Context()); ok {
				op.Observe(r)
			}
			return next.RoundTrip(req)
		})
	}}
}

// injected lists the faults the events say were injected.
func (r *recorder) injected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Name != middleware.EventChaos {
			continue
		}
		marked, kind := false, ""
		for _, a := range e.Attrs {
			switch a.Key {
			case "retrystack.chaos.injected":
				marked = a.Value.AsBool()
			case "retrystack.chaos.fault":
				kind = a.Value.AsString()
			}
		}
		if marked {
			out = append(out, kind)
		}
	}
	return out
}

func noWaits() policy.Policy {
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	return p
}

// Below the retry layer: a status on the first attempt is retried (the
// server sees only the second); a refusal is known not sent, so even a
// POST without a key is resent; a reset after a POST was sent is not
// resent (not-idempotent), and the server has it once. Each injection is
// an event marked injected, and named in its attempt's record.
func TestBelowRetry(t *testing.T) {
	for _, tc := range []struct {
		fault    chaos.Fault
		method   string
		status   int
		stop     policy.StopReason
		sent     int32
		attempts int
	}{
		{chaos.Fault{Kind: chaos.Status, Status: 503, Header: http.Header{"Retry-After": {"0"}}, Rate: 1, Attempts: 1}, "GET", 200, policy.StopSuccess, 1, 2},
		{chaos.Fault{Kind: chaos.Refuse, Rate: 1, Attempts: 2}, "POST", 200, policy.StopSuccess, 1, 3},
		{chaos.Fault{Kind: chaos.Reset, Rate: 1, Attempts: 1}, "POST", 0, policy.StopNotIdempotent, 1, 1},
		{chaos.Fault{Kind: chaos.Reset, Rate: 1, Attempts: 1}, "GET", 200, policy.StopSuccess, 2, 2},
	} {
		for _, proto := range []string{"http1", "h2c"} {
			t.Run(proto+"/"+tc.fault.Kind.String()+"/"+tc.method, func(t *testing.T) {
				var sent atomic.Int32
				srv := newServer(proto, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Add(1); io.WriteString(w, "ok") }))
				defer srv.close()
				e, err := engine.New(engine.Config{Policy: noWaits()})
				if err != nil {
					t.Fatal(err)
				}
				rec := &recorder{}
				s, err := middleware.NewStack(rec.layer(), e.Layer(), chaos.Layer(chaos.Config{Faults: []chaos.Fault{tc.fault}}))
				if err != nil {
					t.Fatal(err)
				}
				c := &http.Client{Transport: s.Then(srv.tr)}
				var resp *http.Response
				if tc.method == "GET" {
					resp, err = c.Get(srv.URL)
				} else {
					resp, err = c.Post(srv.URL, "text/plain", strings.NewReader("x"))
				}
				var rep *engine.Report
				st := 0
				if err == nil {
					st, rep = resp.StatusCode, engine.ReportOf(resp)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				} else {
					rep = engine.ReportFrom(err)
				}
				if st != tc.status || rep == nil || rep.Stop != tc.stop || len(rep.Attempts) != tc.attempts || sent.Load() != tc.sent {
					t.Fatalf("%d %v, report %+v, server saw %d; want %d %s in %d attempts, %d at the server", st, err, rep, sent.Load(), tc.status, tc.stop, tc.attempts, tc.sent)
				}
				if got := rec.injected(); len(got) < 1 || got[0] != tc.fault.Kind.String() {
					t.Fatalf("events %v; want the injection marked", got)
				}
				for i, a := range rep.Attempts { // and in the report: the faulted attempts, and only those
					if want := map[bool]string{true: tc.fault.Kind.String()}[i < tc.fault.Attempts]; a.Injected != want {
						t.Fatalf("attempt %d: Injected %q, want %q (report %v)", i+1, a.Injected, want, rep)
					}
				}
				if err != nil && !strings.Contains(err.Error(), "chaos: injected") {
					t.Fatalf("the error does not say it was injected: %v", err)
				}
			})
		}
	}
}

// A reset after a keyed POST was sent is resolved by the idempotency
// protocol: the retry layer resends with the same key, the server
// answers from its store, and the write happens once.
func TestResetKeyedPostWritesOnce(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			var writes atomic.Int32
			h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := writes.Add(1)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "order "+string(rune('0'+n)))
			}), idempotency.Config{})
			srv := newServer(proto, h)
			defer srv.close()
			p := noWaits()
			p.IdempotencyKeys = true
			e, err := engine.New(engine.Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			s, err := middleware.NewStack(e.Layer(), chaos.Layer(chaos.Config{Faults: []chaos.Fault{{Kind: chaos.Reset, Rate: 1, Attempts: 1, Methods: []string{"POST"}}}}))
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: s.Then(srv.tr)}
			resp, err := c.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"item":1}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rep := engine.ReportOf(resp)
			if resp.StatusCode != 201 || string(b) != "order 1" || writes.Load() != 1 || len(rep.Attempts) != 2 || resp.Header.Get("Idempotent-Replayed") == "" {
				t.Fatalf("%d %q, %d writes, %d attempts, replayed %q; want the first write's answer, replayed, one write",
					resp.StatusCode, b, writes.Load(), len(rep.Attempts), resp.Header.Get("Idempotent-Replayed"))
			}
		})
	}
}

// server is an httptest server over HTTP/1.1 or h2c, with its client
// transport.
type server struct {
	*httptest.Server
	tr *http.Transport
}

func newServer(proto string, h http.Handler) *server {
	ts, tr := rttest.Server(h, proto == "h2c", nil)
	return &server{ts, tr}
}

func (s *server) close() {
	s.tr.CloseIdleConnections()
	s.Close()
}
