package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	srv    *faultserver.Server
	client *http.Client
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func setup(t *testing.T, p policy.Policy, cookies ...cookiejar.Config) *fixture {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	p.Backoff.Base = 1 // no real waits
	jar := cookiejar.Config{Jar: cookiejar.NewJar()}
	if len(cookies) > 0 {
		jar = cookies[0]
	}
	f.client, err = retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel, Transport: &http.Transport{}, Cookies: jar})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		srv.Close()
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	return f
}

func (f *fixture) get(t *testing.T, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := f.client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// span is what the tests compare of a recorded span.
type span struct {
	Name   string
	Kind   trace.SpanKind
	Parent string // the parent's name, "" for a root
	Status codes.Code
	Attrs  map[string]string
	Events []string
}

// tree returns the ended spans in start order, with the attributes named.
func (f *fixture) tree(t *testing.T, keys ...attribute.Key) []span {
	t.Helper()
	if started, ended := len(f.spans.Started()), len(f.spans.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
	names := map[trace.SpanID]string{}
	ended := f.spans.Ended()
	for _, s := range ended {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var out []span
	for _, s := range ended {
		sp := span{Name: s.Name(), Kind: s.SpanKind(), Parent: names[s.Parent().SpanID()], Status: s.Status().Code, Attrs: map[string]string{}}
		for _, kv := range s.Attributes() {
			for _, k := range keys {
				if kv.Key == k {
					sp.Attrs[string(k)] = kv.Value.String()
				}
			}
		}
		for _, e := range s.Events() {
			sp.Events = append(sp.Events, e.Name)
		}
		out = append(out, sp)
	}
	// Ended order puts children first; show parents first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// A 503, a retry that answers 302, and the hop that answers 200: one
// operation span, three attempt spans numbered in one sequence.
func TestSpanTree(t *testing.T) {
	f := setup(t, policy.Default())
	if _, err := f.get(t, context.Background(), f.srv.URL()+"/fail/1/503?then=302&to=/s/200"); err != nil {
		t.Fatal(err)
	}
	resend := attribute.Key("http.request.resend_count")
	status := attribute.Key("http.response.status_code")
	errType := attribute.Key("error.type")
	got := f.tree(t, resend, status, errType, telemetry.AttrAttempts, telemetry.AttrStopReason)
	want := []span{
		{Name: "retrystack GET", Kind: trace.SpanKindInternal, Attrs: map[string]string{"http.response.status_code": "200", "retrystack.attempts": "3", "retrystack.stop_reason": "success"},
			Events: []string{"retrystack.response.discarded", middleware.EventRetry}}, // the 503 thrown away, then the wait
		{Name: "GET", Kind: trace.SpanKindClient, Parent: "retrystack GET", Status: codes.Error, Attrs: map[string]string{"http.response.status_code": "503", "error.type": "503"}},
		{Name: "GET", Kind: trace.SpanKindClient, Parent: "retrystack GET", Attrs: map[string]string{"http.response.status_code": "302", "http.request.resend_count": "1"}},
		{Name: "GET", Kind: trace.SpanKindClient, Parent: "retrystack GET", Attrs: map[string]string{"http.response.status_code": "200", "http.request.resend_count": "2"}},
	}
	// Ended order: the three attempts end before the operation; sort them
	// back into start order.
	if len(got) == 4 {
		got = []span{got[0], got[3], got[2], got[1]}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}

	// Each attempt carried its own span's trace context.
	var parents []string
	for _, e := range f.srv.Log() {
		parents = append(parents, e.Traceparent)
	}
	if len(parents) != 3 || parents[0] == "" || parents[0] == parents[1] || parents[1] == parents[2] {
		t.Errorf("traceparent per attempt: %q, want three different ones", parents)
	}
	traceID := strings.Split(parents[0], "-")[1]
	for _, p := range parents {
		if strings.Split(p, "-")[1] != traceID {
			t.Errorf("traceparent %q is not in trace %s", p, traceID)
		}
	}
}

func TestAttemptAttributes(t *testing.T) {
	f := setup(t, policy.Default())
	u, _ := url.Parse(f.srv.URL() + "/s/200?sig=secret&x=1&X-Goog-Signature=s2")
	u.User = url.UserPassword("user", "pass")
	if _, err := f.get(t, context.Background(), u.String()); err != nil {
		t.Fatal(err)
	}
	keys := []attribute.Key{"http.request.method", "server.address", "server.port", "url.full", "network.protocol.version"}
	got := f.tree(t, keys...)
	port := strings.TrimPrefix(f.srv.URL(), "http://127.0.0.1:")
	redacted := "http://REDACTED:REDACTED@127.0.0.1:" + port + "/s/200?sig=REDACTED&x=1&X-Goog-Signature=REDACTED"
	want := map[string]string{"http.request.method": "GET", "server.address": "127.0.0.1", "server.port": port,
		"url.full": redacted, "network.protocol.version": "1.1"}
	if diff := cmp.Diff(want, got[1].Attrs); diff != "" {
		t.Errorf("attempt attributes (-want +got):\n%s", diff)
	}
	if got[0].Attrs["url.full"] != redacted {
		t.Errorf("operation url.full = %q, want %q", got[0].Attrs["url.full"], redacted)
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://a.test/p?q=1", "http://a.test/p?q=1"},
		{"https://u:p@a.test/p", "https://REDACTED:REDACTED@a.test/p"},
		{"https://u@a.test/p", "https://REDACTED:REDACTED@a.test/p"},
		{"https://a.test/p?AWSAccessKeyId=k&Signature=s&Expires=1", "https://a.test/p?AWSAccessKeyId=REDACTED&Signature=REDACTED&Expires=1"},
		{"https://a.test/p?sig=&q", "https://a.test/p?sig=REDACTED&q"},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.in)
		if got := telemetry.RedactURL(u); got != tt.want {
			t.Errorf("RedactURL(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// A caller that cancels leaves every status unset.
func TestCancellationLeavesStatusUnset(t *testing.T) {
	f := setup(t, policy.Default())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Cancelled before the call: the operation span ends with no attempt.
	if _, err := f.get(t, ctx, f.srv.URL()+"/s/200"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { // cancel once the request is at the server
		for spin := time.Now(); f.srv.Stats("/slow/headers", "").Requests == 0 && time.Since(spin) < time.Minute; runtime.Gosched() {
		}
		cancel()
	}()
	if _, err := f.get(t, ctx, f.srv.URL()+"/slow/headers?delay=1h"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	for _, s := range f.tree(t) {
		if s.Status != codes.Unset {
			t.Errorf("%s %v: status %v, want unset", s.Name, s.Kind, s.Status)
		}
	}
}

func TestPitfallEvents(t *testing.T) {
	p := presets.ReqwestForHost("127.0.0.1")
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify
	f := setup(t, p, cookiejar.Config{Jar: cookiejar.NewJar(), DropDiscarded: true}) // reqwest's loss, for the pitfall
	req, _ := http.NewRequest("POST", f.srv.URL()+"/login", strings.NewReader("u=a"))
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var events []string
	for _, s := range f.spans.Ended() {
		for _, e := range s.Events() {
			if e.Name != middleware.EventPitfall {
				continue
			}
			for _, kv := range e.Attributes {
				events = append(events, string(kv.Key)+"="+kv.Value.String())
			}
		}
	}
	want := []string{"retrystack.pitfall.name=non-idempotent-retried", "retrystack.pitfall.name=cookie-lost", `retrystack.pitfall.cookies=["lb"]`}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("pitfall events (-want +got):\n%s", diff)
	}
	for _, s := range f.spans.Ended() {
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				if strings.Contains(kv.Value.String(), "node-2") {
					t.Errorf("a cookie value reached the span: %s=%s", kv.Key, kv.Value.String())
				}
			}
		}
	}
}

func TestMetrics(t *testing.T) {
	f := setup(t, policy.Default())
	for _, path := range []string{"/fail/2/503", "/s/200"} {
		if _, err := f.get(t, context.Background(), f.srv.URL()+path); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				n := uint64(0)
				for _, p := range d.DataPoints {
					n += p.Count
				}
				got[m.Name] = "count=" + itoa(int64(n))
			case metricdata.Histogram[int64]:
				var vals []string
				for _, p := range d.DataPoints {
					vals = append(vals, "sum="+itoa(p.Sum)+",count="+itoa(int64(p.Count)))
				}
				got[m.Name] = strings.Join(vals, ";")
			case metricdata.Sum[int64]:
				var vals []string
				for _, p := range d.DataPoints {
					r, _ := p.Attributes.Value(telemetry.AttrReason)
					vals = append(vals, r.String()+"="+itoa(p.Value))
				}
				got[m.Name] = strings.Join(vals, ";")
			}
		}
	}
	want := map[string]string{
		"http.client.request.duration":         "count=4",       // 3 attempts + 1
		"retrystack.client.operation.duration": "count=2",       // 2 operations
		"retrystack.client.operation.resends":  "sum=2,count=2", // 2 resends, and a 0 recorded too
		"retrystack.client.retry.delay":        "count=2",       // 2 waits
		"retrystack.client.retries":            "status=2",      // by reason
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func itoa(n int64) string { return attribute.Int64Value(n).String() }

// A stream net/http resends by itself shows as an event on the attempt
// span, whether the retry layer above watched the wire or the attempt
// layer did on its own.
func TestTransparentAttemptEvent(t *testing.T) {
	for name, build := range map[string]func(*telemetry.Telemetry, http.RoundTripper) (http.RoundTripper, error){
		"under the retry layer": func(tel *telemetry.Telemetry, tr http.RoundTripper) (http.RoundTripper, error) {
			c, err := retrystack.NewClient(retrystack.Config{Telemetry: tel, Transport: tr})
			if err != nil {
				return nil, err
			}
			return c.Transport, nil
		},
		"alone": func(tel *telemetry.Telemetry, tr http.RoundTripper) (http.RoundTripper, error) {
			s, err := middleware.NewStack(tel.Attempt())
			return s.Then(tr), err
		},
	} {
		t.Run(name, func(t *testing.T) {
			h2, err := faultserver.NewH2(faultserver.H2Config{Faults: []faultserver.H2Fault{faultserver.H2Refuse}})
			if err != nil {
				t.Fatal(err)
			}
			defer h2.Close()
			rec, tel := traced(t)
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			defer tr.CloseIdleConnections()
			rt, err := build(tel, tr)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: rt}).Get(h2.URL() + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var events []string
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindClient {
					for _, e := range s.Events() {
						events = append(events, e.Name)
					}
				}
			}
			if diff := cmp.Diff([]string{telemetry.EventTransparent}, events); diff != "" {
				t.Errorf("attempt span events (-want +got):\n%s", diff)
			}
		})
	}
}

// The operation span's retrystack.attempts and the resends metric count
// every physical send, a resend net/http made on its own included: a
// refused HTTP/2 stream it resent, one under a GOAWAY, a GET on a reused
// HTTP/1.1 connection the server closed unanswered. (Issue 46: 1 attempt, 0 resends, while
// the server saw 2.)
func TestOperationCountsHiddenSends(t *testing.T) {
	for _, proto := range []string{"h2c", "h2c-goaway", "http1"} {
		t.Run(proto, func(t *testing.T) {
			rec, reader, tel := instrumented(t)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			var url string
			var served func() int
			if proto != "http1" {
				fault := faultserver.H2Refuse
				if proto == "h2c-goaway" {
					fault = faultserver.H2GoAway // a GOAWAY below the stream: net/http sends it again on a new connection
				}
				h2, err := faultserver.NewH2(faultserver.H2Config{Faults: []faultserver.H2Fault{fault}})
				if err != nil {
					t.Fatal(err)
				}
				defer h2.Close()
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
				url, served = h2.URL()+"/", func() int { return int(h2.Streams()) }
			} else {
				srv, err := faultserver.New()
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				url = srv.URL() + "/abort"
				served = func() int {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if err := srv.WaitIdle(ctx); err != nil {
						t.Fatal(err)
					}
					n := 0
					for _, e := range srv.Log() {
						if strings.HasPrefix(e.Path, "/abort") {
							n++
						}
					}
					return n
				}
				warm, err := (&http.Client{Transport: tr}).Get(srv.URL() + "/s/200")
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, warm.Body)
				warm.Body.Close() // its connection is reused, and closed unanswered
			}
			p := policy.Never()
			c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel, Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := c.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if served() != 2 {
				t.Fatalf("the server saw %d requests, want 2", served())
			}
			attempts := ""
			for _, s := range rec.Ended() {
				if v, ok := attr(s, "retrystack.attempts"); ok {
					attempts = v
				}
			}
			if attempts != "2" {
				t.Errorf("retrystack.attempts = %q, want 2", attempts)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			var resends int64 = -1
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name == "retrystack.client.operation.resends" {
						for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
							resends = dp.Sum
						}
					}
				}
			}
			if resends != 1 {
				t.Errorf("resends recorded %d, want 1", resends)
			}
		})
	}
}

// Under a hedge, every physical send is counted: the operation's
// retrystack.attempts is never under the streams the server saw, whether
// the hedge fired before net/http resent the refused stream or not at
// all; it is over by at most the one hedge, which counts when it is handed
// to the transport even if it is cancelled before its stream opens.
func TestHiddenSendsUnderAHedgeCounted(t *testing.T) {
	rec, _, tel := instrumented(t)
	h2, err := faultserver.NewH2(faultserver.H2Config{Faults: []faultserver.H2Fault{faultserver.H2Refuse}})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	e, err := engine.New(engine.Config{Policy: policy.Never()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := middleware.NewStack(tel.Operation(), e.Layer(), hedge.Layer(hedge.Config{Delay: time.Microsecond}), tel.Attempt())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: st.Then(tr)}).Get(h2.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections() // the losing hedge's stream is over
	attempts := ""
	for _, s := range rec.Ended() {
		if v, ok := attr(s, "retrystack.attempts"); ok {
			attempts = v
		}
	}
	n, _ := strconv.Atoi(attempts)
	if streams := int(h2.Streams()); n < streams || n > streams+1 {
		t.Errorf("retrystack.attempts = %s, the server saw %d streams", attempts, streams)
	}
}
