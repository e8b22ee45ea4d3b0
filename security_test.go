package retrystack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/redirect"
	"github.com/retrystack/retrystack/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// sensitive are the request headers a hop to another origin drops.
var sensitive = []string{"Authorization", "Cookie", "Proxy-Authorization", "Www-Authenticate"}

// Secrets a request carries, or a server sets, never reach a span, a
// metric, a hook's payload or an error message, whatever the operation
// goes through: retries, exhaustion, resets, deadlines, redirects across
// origins, lost cookies, a refused POST.
func TestSecretsStayOut(t *testing.T) {
	const (
		auth     = "Bearer s3cret-auth-token"
		cookie   = "s3cret-cookie-value"
		password = "s3cret-password"
		sig      = "s3cret-signature"
		jarValue = "node-2" // the value /login sets in a cookie on its 503
	)
	srv := newServer(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var out []string // everything the library said, as text
	say := func(format string, args ...any) {
		mu.Lock()
		out = append(out, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	hooks := engine.Hooks{
		OnAttempt: func(ev engine.Event) {
			say("attempt %+v %+v %v %s", ev.Attempt, *ev.Report, ev.Context, ev.Report)
		},
		OnRetry: func(ev engine.Event) { say("retry %+v %+v %v", ev, *ev.Report, ev.Context) },
		OnGiveUp: func(r *engine.Report) {
			say("give-up %+v %s", *r, r)
			for _, a := range r.Attempts {
				if a.Err != nil {
					say("attempt error %v", a.Err)
				}
			}
		},
		OnPitfall: func(ev engine.Event) { say("pitfall %+v %+v %v", ev, *ev.Report, ev.Context) },
	}
	p := policy.Default()
	p.Backoff.Base = time.Millisecond
	p.Timeout = 500 * time.Millisecond
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := retrystack.NewClient(retrystack.Config{Policy: &p, Telemetry: tel, Hooks: hooks, FailOnExhausted: true, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}

	u, _ := url.Parse(srv.URL())
	u.User = url.UserPassword("user", password)
	withUser := u.String()
	for _, tt := range []struct{ method, url string }{
		{"GET", srv.URL() + "/fail/2/503"},                             // retried to success
		{"GET", srv.URL() + "/s/503?retry-after=0"},                    // exhausted: an *ExhaustedError
		{"GET", srv.URL() + "/abort?reset=1"},                          // resets
		{"GET", srv.URL() + "/slow/headers?delay=3s"},                  // the total deadline
		{"GET", srv.URL() + "/slow/body?delay=3s"},                     // the deadline during the body read
		{"GET", srv.URL() + "/redirect/302/2?cross=1"},                 // hops across origins
		{"GET", srv.URL() + "/login"},                                  // a 503 sets a cookie that is lost
		{"GET", srv.URL() + "/me"},                                     // sends the jar's cookies
		{"POST", srv.URL() + "/orders"},                                // not idempotent
		{"GET", withUser + "/s/503?sig=" + sig},                        // userinfo and a signature
		{"GET", withUser + "/redirect/302/1?cross=1&Signature=" + sig}, // and across origins
	} {
		var body io.Reader
		if tt.method == "POST" {
			body = strings.NewReader("item")
		}
		req, _ := http.NewRequest(tt.method, tt.url, body)
		req.Header.Set("Authorization", auth)
		req.Header.Set("Cookie", "sid="+cookie)
		req.Header.Set("Proxy-Authorization", auth)
		resp, err := client.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil {
			// http.Client's *url.Error quotes the URL, signature and all
			// (the password masked): say only what the stack below it said.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			say("error %v", err)
			var se *middleware.StatusError
			if errors.As(err, &se) {
				say("status error body %q", se.Body)
			}
		}
	}

	for _, s := range spans.Ended() {
		say("span %s %v", s.Name(), s.Status())
		for _, kv := range s.Attributes() {
			say("span attribute %s=%s", kv.Key, kv.Value.String())
		}
		for _, e := range s.Events() {
			say("span event %s", e.Name)
			for _, kv := range e.Attributes {
				say("span event attribute %s=%s", kv.Key, kv.Value.String())
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			b, _ := json.Marshal(m.Data)
			say("metric %s %s", m.Name, b)
		}
	}

	if len(out) < 100 {
		t.Fatalf("only %d outputs recorded: the scenarios did not run", len(out))
	}
	for _, o := range out {
		for _, secret := range []string{"s3cret", jarValue} {
			if strings.Contains(o, secret) {
				t.Errorf("%q leaked: %s", secret, o)
			}
		}
	}
	// The checks above must have seen the redacted forms.
	var redacted bool
	for _, o := range out {
		redacted = redacted || strings.Contains(o, "url.full=http://REDACTED:REDACTED@127.0.0.1:") && strings.Contains(o, "sig=REDACTED")
	}
	if !redacted {
		t.Error("no url.full with redacted userinfo and signature")
	}
}

// A hop to another origin — another host, or https → http — drops the
// credentials through the whole stack; the cookie and retry layers below
// do not bring them back.
func TestCredentialsAcrossOriginsFullStack(t *testing.T) {
	srv := newServer(t)
	credentialed := func(target string) *http.Request {
		req, _ := http.NewRequest("GET", target, nil)
		for _, h := range sensitive {
			req.Header.Set(h, "s3cret")
		}
		return req
	}
	echo := func(c *http.Client, req *http.Request) faultserver.Echo {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e faultserver.Echo
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return e
	}
	p := policy.Default()
	p.Backoff.Base = time.Millisecond
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}

	same := echo(c, credentialed(srv.URL()+"/redirect/302/2"))
	cross := echo(c, credentialed(srv.URL()+"/redirect/302/2?cross=1"))

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL()+"/echo", http.StatusFound)
	}))
	defer tlsSrv.Close()
	tlsTr := tlsSrv.Client().Transport.(*http.Transport)
	defer tlsTr.CloseIdleConnections()
	tc, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tlsTr})
	if err != nil {
		t.Fatal(err)
	}
	downgrade := echo(tc, credentialed(tlsSrv.URL))

	for _, h := range sensitive {
		if same.Header.Get(h) != "s3cret" {
			t.Errorf("same origin: %s dropped", h)
		}
		if v := cross.Header.Get(h); v != "" {
			t.Errorf("cross origin: %s = %q reached the last hop", h, v)
		}
		if v := downgrade.Header.Get(h); v != "" {
			t.Errorf("https → http: %s = %q sent in the clear", h, v)
		}
	}
}

// The hop limit holds through the whole stack, whatever the retry layer
// does on each hop.
func TestHopLimitFullStack(t *testing.T) {
	srv := newServer(t)
	for _, tt := range []struct {
		maxHops, wantMax, wantRequests int
		path                           string
	}{
		{0, 10, 11, "/redirect/302/loop"},
		{2, 2, 3, "/redirect/307/5"},
		{1, 1, 2, "/redirect/301/loop?cross=1"},
	} {
		key := fmt.Sprintf("hops-%d-%d", tt.maxHops, tt.wantRequests)
		tr := &http.Transport{}
		c, err := retrystack.NewClient(retrystack.Config{Redirect: redirect.Config{MaxHops: tt.maxHops}, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(srv.URL() + tt.path + sepKey(tt.path, key))
		if err == nil {
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		var tooMany *redirect.TooManyHopsError
		if !errors.As(err, &tooMany) || tooMany.Max != tt.wantMax {
			t.Errorf("%s, MaxHops %d: %v, want a *TooManyHopsError for %d", tt.path, tt.maxHops, err, tt.wantMax)
		}
		if n := requests(t, srv, key); n != tt.wantRequests {
			t.Errorf("%s, MaxHops %d: the server saw %d requests, want %d", tt.path, tt.maxHops, n, tt.wantRequests)
		}
	}
}

// An absurd Retry-After — a trillion seconds, a date centuries ahead — is
// never waited: the default policy stops at once with wait-exceeds-budget
// and hands back the 503.
func TestAbsurdRetryAfter(t *testing.T) {
	srv := newServer(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var waits []time.Duration
	for _, hint := range []string{
		"retry-after=1000000000000",
		"retry-after=99999999999999999999999999999",
		"retry-after-in=2000000h",                                         // about 228 years ahead
		"retry-after=" + url.QueryEscape("Fri, 31 Dec 9999 23:59:59 GMT"), // the last HTTP-date
		"retry-after-in=2000000h&retry-after-form=asctime",
	} {
		// A client per hint: the first answer holds the host back for
		// the client's other requests (policy.RetryAfter.Pace), which is
		// not what this test is about.
		c, err := retrystack.NewClient(retrystack.Config{Transport: tr, Hooks: engine.Hooks{
			OnRetry: func(ev engine.Event) { waits = append(waits, ev.Wait) }}})
		if err != nil {
			t.Fatal(err)
		}
		path := "/s/503?" + hint
		resp, err := c.Get(srv.URL() + path + sepKey(path, hint))
		if err != nil {
			t.Fatalf("%s: %v", hint, err)
		}
		resp.Body.Close()
		// A connection the transport dialed and kept unused is not a
		// request: close it, or the server waits on it (Go 1.27's
		// transport can leave one).
		tr.CloseIdleConnections()
		if got := engine.ReportOf(resp); resp.StatusCode != 503 || got.Stop != policy.StopWaitExceedsBudget || len(got.Attempts) != 1 {
			t.Errorf("%s: %d, %v; want the 503 after one attempt, wait-exceeds-budget", hint, resp.StatusCode, got)
		}
		if n := requests(t, srv, hint); n != 1 {
			t.Errorf("%s: the server saw %d requests, want 1", hint, n)
		}
	}
	if len(waits) != 0 {
		t.Errorf("waits planned: %v", waits)
	}
}

// countingBase counts, per response, the body bytes read by the layers
// above it, and whether each send reused a connection.
type countingBase struct {
	tr     *http.Transport
	mu     sync.Mutex
	read   []*atomic.Int64
	reused []bool
}

func (c *countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		c.mu.Lock()
		c.reused = append(c.reused, i.Reused)
		c.mu.Unlock()
	}})
	resp, err := c.tr.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	n := new(atomic.Int64)
	c.mu.Lock()
	c.read = append(c.read, n)
	c.mu.Unlock()
	resp.Body = &countingBody{ReadCloser: resp.Body, n: n}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// A discarded response's huge body — a retried 503's, a followed 302's — is
// read no further than the drain limit: its connection is closed instead
// of drained, and the next send dials anew.
func TestHugeDiscardedBodyIsNotRead(t *testing.T) {
	const size = 16 << 20
	srv := newServer(t)
	for _, tt := range []struct {
		path       string
		wantStatus int
	}{
		{fmt.Sprintf("/fail/2/503?size=%d", size), 200},                   // two 503s discarded by the retry layer
		{fmt.Sprintf("/redirect/302/1?size=%d", size), 200},               // one 302 discarded by the redirect layer
		{fmt.Sprintf("/fail/1/503?then=302&to=/echo&size=%d", size), 200}, // both
	} {
		base := &countingBase{tr: &http.Transport{}}
		p := policy.Default()
		p.Backoff.Base = time.Millisecond
		s, err := retrystack.NewStack(retrystack.Config{Policy: &p})
		if err != nil {
			t.Fatal(err)
		}
		c := retrystack.Client(s, base)
		resp, err := c.Get(srv.URL() + tt.path + sepKey(tt.path, tt.path))
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		base.tr.CloseIdleConnections()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("%s: status %d", tt.path, resp.StatusCode)
		}
		var read []int64
		for _, n := range base.read {
			read = append(read, n.Load())
		}
		discarded := read[:len(read)-1]
		for i, n := range discarded {
			if n > wire.DrainLimit {
				t.Errorf("%s: discarded response %d: %d bytes read, over the drain limit %d", tt.path, i+1, n, wire.DrainLimit)
			}
		}
		want := make([]bool, len(read)) // no send after a huge body reuses its connection
		if diff := cmp.Diff(want, base.reused); diff != "" {
			t.Errorf("%s: connections reused (-want +got):\n%s", tt.path, diff)
		}
		if len(discarded) == 0 {
			t.Errorf("%s: nothing was discarded", tt.path)
		}
	}
}
