package policy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
)

func TestStatusSet(t *testing.T) {
	s := policy.RetryableStatuses()
	if diff := cmp.Diff([]int{408, 425, 429, 500, 502, 503, 504}, s.Codes()); diff != "" {
		t.Errorf("RetryableStatuses (-want +got):\n%s", diff)
	}
	for _, code := range []int{400, 401, 403, 404, 422, 501, 99, 600, -1} {
		if s.Has(code) {
			t.Errorf("Has(%d) = true", code)
		}
	}
	edges := policy.NewStatusSet(100, 163, 164, 599, 600, 42)
	if diff := cmp.Diff([]int{100, 163, 164, 599}, edges.Codes()); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
}

func TestIdempotent(t *testing.T) {
	tests := []struct {
		method, header string
		want           bool
	}{
		{"GET", "", true}, {"HEAD", "", true}, {"OPTIONS", "", true}, {"TRACE", "", true},
		{"PUT", "", true}, {"DELETE", "", true}, {"", "", true},
		{"POST", "", false}, {"PATCH", "", false}, {"CONNECT", "", false},
		{"POST", "Idempotency-Key", true}, {"PATCH", "X-Idempotency-Key", true},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://example.test/", nil)
		if tt.header != "" {
			req.Header.Set(tt.header, "k-1")
		}
		if got := policy.Idempotent(req); got != tt.want {
			t.Errorf("Idempotent(%s, %q) = %v", tt.method, tt.header, got)
		}
	}
}

// realErrors produces the errors the kinds are about from real connections.
func realErrors(t *testing.T) map[string]error {
	t.Helper()
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	client := &http.Client{Transport: tr}
	get := func(url string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return errors.New("no error")
		}
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(cancelled, http.MethodGet, srv.URL()+"/s/200", nil)
	_, cancelErr := client.Do(req)

	return map[string]error{
		"refused":  get("http://"+closedPort+"/", time.Minute),
		"reset":    get(srv.URL()+"/abort?reset=1", time.Minute),
		"eof":      get(srv.URL()+"/abort", time.Minute),
		"timeout":  get(srv.URL()+"/slow/headers?delay=1h", 10*time.Millisecond),
		"canceled": cancelErr,
	}
}

func TestKindOf(t *testing.T) {
	errs := realErrors(t)
	tests := []struct {
		name string
		err  error
		want policy.ErrorKind
	}{
		{"refused", errs["refused"], policy.ErrorRefused},
		{"reset", errs["reset"], policy.ErrorReset},
		{"eof", errs["eof"], policy.ErrorEOF},
		{"timeout", errs["timeout"], policy.ErrorTimeout},
		{"canceled", errs["canceled"], policy.ErrorCanceled},
		{"nil", nil, policy.ErrorOther},
		{"plain", errors.New("boom"), policy.ErrorOther},
		{"tls alert", &url.Error{Op: "Get", Err: tls.AlertError(40)}, policy.ErrorTLS},
		{"tls record header", fmt.Errorf("x: %w", tls.RecordHeaderError{Msg: "not tls"}), policy.ErrorTLS},
		{"certificate", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, policy.ErrorCertificate},
		{"dns not found", &net.DNSError{Err: "no such host", IsNotFound: true}, policy.ErrorDNSNotFound},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", IsTemporary: true}, policy.ErrorDNS},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, policy.ErrorTimeout},
		{"epipe", &net.OpError{Op: "write", Err: syscall.EPIPE}, policy.ErrorReset},
		{"unexpected eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), policy.ErrorEOF},
		// net/http's unexported errServerClosedIdle, as its errors.New
		// makes it (engine's TestServerClosedIdleConnectionIsResent meets
		// the real one); the same text of another type is not it.
		{"server closed idle", &url.Error{Op: "Put", Err: errors.New("http: server closed idle connection")}, policy.ErrorEOF},
		{"server closed idle, another type", &net.AddrError{Err: "http: server closed idle connection"}, policy.ErrorOther},
		{"server closed idle, longer", errors.New("http: server closed idle connection: more"), policy.ErrorOther},
	}
	for _, tt := range tests {
		if got := policy.KindOf(tt.err); got != tt.want {
			t.Errorf("%s: KindOf(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func request(method string, header ...string) *http.Request {
	req, _ := http.NewRequest(method, "http://example.test/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func status(code int) *http.Response { return &http.Response{StatusCode: code, Header: http.Header{}} }

func TestDefaultClassifier(t *testing.T) {
	classify := policy.Default().Classify
	reset := &net.OpError{Op: "read", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		a    policy.Attempt
		want policy.Decision
	}{
		{"200", policy.Attempt{Request: request("GET"), Response: status(200), Processed: policy.Responded}, policy.Stop(policy.StopSuccess)},
		{"304", policy.Attempt{Request: request("GET"), Response: status(304), Processed: policy.Responded}, policy.Stop(policy.StopSuccess)},
		{"404", policy.Attempt{Request: request("GET"), Response: status(404), Processed: policy.Responded}, policy.Stop(policy.StopNonRetryable)},
		{"501", policy.Attempt{Request: request("GET"), Response: status(501), Processed: policy.Responded}, policy.Stop(policy.StopNonRetryable)},
		{"GET 503", policy.Attempt{Request: request("GET"), Response: status(503), Processed: policy.Responded}, policy.Retry("status")},
		{"POST 503", policy.Attempt{Request: request("POST"), Response: status(503), Processed: policy.Responded}, policy.Stop(policy.StopNotIdempotent)},
		{"keyed POST 503", policy.Attempt{Request: request("POST", "Idempotency-Key", "k"), Response: status(503), Processed: policy.Responded}, policy.Retry("status")},
		{"GET reset", policy.Attempt{Request: request("GET"), Err: reset, Processed: policy.SentNoResponse}, policy.Retry("connection")},
		{"POST reset", policy.Attempt{Request: request("POST"), Err: reset, Processed: policy.SentNoResponse}, policy.Stop(policy.StopNotIdempotent)},
		{"POST refused, not sent", policy.Attempt{Request: request("POST"), Err: refused, Processed: policy.NotSent}, policy.Retry("connection")},
		{"GET timeout", policy.Attempt{Request: request("GET"), Err: context.DeadlineExceeded, Processed: policy.SentNoResponse}, policy.Retry("timeout")},
		{"GET cancelled", policy.Attempt{Request: request("GET"), Err: context.Canceled, Processed: policy.SentNoResponse}, policy.Stop(policy.StopCancelled)},
		{"GET certificate", policy.Attempt{Request: request("GET"), Err: &tls.CertificateVerificationError{}, Processed: policy.NotSent}, policy.Stop(policy.StopNonRetryable)},
		{"GET other", policy.Attempt{Request: request("GET"), Err: errors.New("boom"), Processed: policy.SentNoResponse}, policy.Stop(policy.StopNonRetryable)},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, classify(tt.a)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPresetClassifiers(t *testing.T) {
	tests := []struct {
		preset string
		a      policy.Attempt
		want   policy.Decision
	}{
		{"python", policy.Attempt{Request: request("POST"), Response: status(503)}, policy.Stop(policy.StopNotIdempotent)},
		{"python", policy.Attempt{Request: request("POST", "Idempotency-Key", "k"), Response: status(503)}, policy.Retry("status")},
		{"python", policy.Attempt{Request: request("TRACE"), Response: status(503)}, policy.Stop(policy.StopNotIdempotent)},
		{"python", policy.Attempt{Request: request("GET"), Response: status(404)}, policy.Stop(policy.StopNonRetryable)},
		{"python", policy.Attempt{Request: request("POST"), Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, Processed: policy.NotSent}, policy.Stop(policy.StopNotIdempotent)},
		{"node", policy.Attempt{Request: request("GET"), Response: status(503)}, policy.Retry("status")},
		{"node", policy.Attempt{Request: request("GET"), Response: status(429)}, policy.Retry("status")},
		{"node", policy.Attempt{Request: request("GET"), Response: status(500)}, policy.Stop(policy.StopNonRetryable)},
		{"node", policy.Attempt{Request: request("PUT"), Response: status(503)}, policy.Stop(policy.StopNotIdempotent)},
		{"node", policy.Attempt{Request: request("GET"), Err: context.DeadlineExceeded}, policy.Stop(policy.StopNonRetryable)},
	}
	presets := map[string]policy.Policy{"python": presets.Python(), "node": presets.Node()}
	for _, tt := range tests {
		got := presets[tt.preset].Classify(tt.a)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s: (-want +got):\n%s", tt.preset, tt.a.Request.Method, diff)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []policy.Policy{policy.Default(), presets.Python(), presets.Node()} {
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", p.Name, err)
		}
	}
	tests := []struct {
		edit func(*policy.Policy)
		want *policy.ConfigError
	}{
		{func(p *policy.Policy) { p.MaxAttempts = 0 }, &policy.ConfigError{Field: "policy.Policy.MaxAttempts", Value: 0, Reason: "must be between 1 and 10000 (1 never retries; policy.Default() has 3)"}},
		{func(p *policy.Policy) { p.MaxAttempts = -3 }, &policy.ConfigError{Field: "policy.Policy.MaxAttempts", Value: -3, Reason: "must be between 1 and 10000 (1 never retries; policy.Default() has 3)"}},
		{func(p *policy.Policy) { p.AttemptTimeout = -1 }, &policy.ConfigError{Field: "policy.Policy.AttemptTimeout", Value: time.Duration(-1), Reason: "must not be negative (0: no limit per attempt)"}},
		{func(p *policy.Policy) { p.Timeout = -time.Second }, &policy.ConfigError{Field: "policy.Policy.Timeout", Value: -time.Second, Reason: "must not be negative (0: only the caller's context bounds the operation)"}},
		{func(p *policy.Policy) { p.Classify = nil }, &policy.ConfigError{Field: "policy.Policy.Classify", Reason: "required: assign a Rules value's Classify method, or start from policy.Default() or policy.Never()"}},
		{func(p *policy.Policy) { p.Backoff.Base = -1 }, &policy.ConfigError{Field: "policy.Policy.Backoff.Base", Value: time.Duration(-1), Reason: "must not be negative (0: no wait between attempts)"}},
		{func(p *policy.Policy) { p.Backoff.Jitter = 9 }, &policy.ConfigError{Field: "policy.Policy.Backoff.Jitter", Value: policy.Jitter(9), Reason: "unknown jitter: use JitterFull, JitterNone or JitterTenPercent"}},
		{func(p *policy.Policy) { p.RetryAfter.Max = -1 }, &policy.ConfigError{Field: "policy.Policy.RetryAfter.Max", Value: time.Duration(-1), Reason: "must not be negative (0: only the deadline limits a hint)"}},
	}
	for _, tt := range tests {
		p := policy.Default()
		tt.edit(&p)
		err := p.Validate()
		var ce *policy.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%v: not a *ConfigError", err)
			continue
		}
		if diff := cmp.Diff(tt.want, ce); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}

// A Policy built from its zero value, the natural first try, is told
// where to start instead.
func TestZeroPolicyPointsAtDefault(t *testing.T) {
	for _, p := range []policy.Policy{{}, {Timeout: 10 * time.Second}, {Name: "mine", Backoff: policy.Backoff{Base: time.Second}}} {
		err := p.Validate()
		want := "retrystack: policy.Policy.MaxAttempts = 0: a Policy built from its zero value retries nothing and is invalid: " +
			"start from policy.Default() (or policy.Never()) and change fields, e.g. p := policy.Default(); p.Timeout = 10 * time.Second"
		if err == nil || err.Error() != want {
			t.Errorf("%+v: Validate() = %v, want %s", p, err, want)
		}
	}
	// With a classifier it is no longer a zero Policy: the field is named.
	p := policy.Policy{Classify: policy.Default().Classify}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "MaxAttempts = 0: must be between 1 and 10000") {
		t.Errorf("MaxAttempts 0 with a classifier: %v", err)
	}
}

func waits(b interface{ Next() (time.Duration, bool) }, n int) []time.Duration {
	var out []time.Duration
	for range n {
		d, stop := b.Next()
		if stop {
			break
		}
		out = append(out, d)
	}
	return out
}

func TestBackoff(t *testing.T) {
	half := func() float64 { return 0.5 }
	ms := time.Millisecond
	tests := []struct {
		name string
		b    policy.Backoff
		rnd  func() float64
		want []time.Duration
	}{
		{"node, r fixed at 0.5", presets.Node().Backoff, half, []time.Duration{25 * ms, 50 * ms, 100 * ms, 100 * ms}},
		{"python ceiling, r→1", presets.Python().Backoff, func() float64 { return 0.999999999 }, []time.Duration{499999999, 999999999, 1999999998, 3999999996, 7999999992, 7999999992}},
		{"no jitter", policy.Backoff{Base: 10 * ms, Cap: 50 * ms, Jitter: policy.JitterNone}, nil, []time.Duration{10 * ms, 20 * ms, 40 * ms, 50 * ms}},
		{"ten percent, low end", policy.Backoff{Base: 200 * ms, Jitter: policy.JitterTenPercent}, func() float64 { return 0 }, []time.Duration{180 * ms, 360 * ms, 720 * ms}},
		{"ten percent, middle", policy.Backoff{Base: 200 * ms, Jitter: policy.JitterTenPercent}, half, []time.Duration{200 * ms, 400 * ms, 800 * ms}},
		{"zero never waits", policy.Backoff{}, nil, []time.Duration{0, 0, 0}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, waits(tt.b.New(tt.rnd), len(tt.want))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// Each New is a fresh sequence: go-retry backoffs hold state.
	b := presets.Node().Backoff
	first, second := b.New(half), b.New(half)
	waits(first, 3)
	if d, _ := second.Next(); d != 25*ms {
		t.Errorf("a second backoff starts at %v, want 25ms", d)
	}
}

// An uncapped backoff saturates instead of overflowing.
func TestBackoffSaturates(t *testing.T) {
	b := policy.Backoff{Base: time.Second}.New(func() float64 { return 0.999 })
	for range 100 {
		if d, _ := b.Next(); d < 0 {
			t.Fatalf("negative wait %v", d)
		}
	}
}

func BenchmarkDecision(b *testing.B) {
	classify := policy.Default().Classify
	a := policy.Attempt{Request: request("GET"), Response: status(200), Number: 1, Processed: policy.Responded}
	b.ReportAllocs()
	for b.Loop() {
		if d := classify(a); d.Retry {
			b.Fatal("retry on 200")
		}
	}
}

// The decision allocates nothing, on a status and on the errors a
// transport returns alike: it runs on every attempt.
func TestDecisionAllocatesNothing(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	post, _ := http.NewRequest("POST", "http://example.test/", nil)
	reset := &url.Error{Op: "Get", URL: "http://example.test/", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	refused := &url.Error{Op: "Get", URL: "http://example.test/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	timeout := &url.Error{Op: "Get", URL: "http://example.test/", Err: context.DeadlineExceeded}
	for _, p := range []policy.Policy{policy.Default(), presets.Python(), presets.Node(), presets.ReqwestDefault(), presets.Codex()} {
		for name, a := range map[string]policy.Attempt{
			"200":           {Request: req, Response: &http.Response{StatusCode: 200}, Number: 1, Processed: policy.Responded},
			"503":           {Request: req, Response: &http.Response{StatusCode: 503}, Number: 1, Processed: policy.Responded},
			"reset":         {Request: req, Err: reset, Number: 1, Processed: policy.SentNoResponse},
			"refused, POST": {Request: post, Err: refused, Number: 1, Processed: policy.NotSent},
			"timeout":       {Request: req, Err: timeout, Number: 2, Processed: policy.SentNoResponse},
		} {
			if n := testing.AllocsPerRun(100, func() { p.Classify(a) }); n != 0 {
				t.Errorf("%s, %s: %v allocations", p.Name, name, n)
			}
		}
	}
}
