package policy_test

import (
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
	"golang.org/x/net/http2"
)

func TestScope(t *testing.T) {
	get := func(url string) *http.Request {
		req, _ := http.NewRequest("GET", url, nil)
		return req
	}
	tests := []struct {
		scope policy.Scope
		url   string
		want  bool
	}{
		{policy.Scope{}, "http://anything.test/", true},
		{policy.Scope{Hosts: []string{"localhost"}}, "http://localhost:8080/x", true},
		{policy.Scope{Hosts: []string{"LocalHost"}}, "http://localhost/x", true},
		{policy.Scope{Hosts: []string{"localhost"}}, "http://127.0.0.1:8080/x", false},
		{policy.Scope{Hosts: []string{"a.test", "b.test"}}, "http://b.test/", true},
		{policy.Scope{Match: func(r *http.Request) bool { return r.URL.Path != "/admin" }}, "http://a.test/admin", false},
		{policy.Scope{Hosts: []string{"a.test"}, Match: func(*http.Request) bool { return true }}, "http://c.test/", false},
	}
	for _, tt := range tests {
		if got := tt.scope.Covers(get(tt.url)); got != tt.want {
			t.Errorf("%+v.Covers(%s) = %v", tt.scope, tt.url, got)
		}
	}
}

func TestHTTP2Kinds(t *testing.T) {
	tests := []struct {
		err  error
		want policy.ErrorKind
		nack bool
	}{
		{http2.StreamError{StreamID: 1, Code: http2.ErrCodeRefusedStream}, policy.ErrorRefusedStream, true},
		{fmt.Errorf("round trip: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeProtocol}), policy.ErrorProtocol, false},
		//lint:ignore SA1019 x/net's HTTP/2 Transport still returns it
		{http2.GoAwayError{LastStreamID: 1, ErrCode: http2.ErrCodeNo}, policy.ErrorGoAway, true},
		//lint:ignore SA1019 as above
		{http2.GoAwayError{ErrCode: http2.ErrCodeEnhanceYourCalm}, policy.ErrorProtocol, false},
		{http2.ConnectionError(http2.ErrCodeProtocol), policy.ErrorProtocol, false},
		{http2.StreamError{StreamID: 5, Code: http2.ErrCodeInternal}, policy.ErrorStreamReset, false},
		{fmt.Errorf("round trip: %w", http2.StreamError{StreamID: 7, Code: http2.ErrCodeCancel}), policy.ErrorStreamReset, false},
		{http2.StreamError{StreamID: 9, Code: http2.ErrCodeEnhanceYourCalm}, policy.ErrorProtocol, false},
		// net/http's writer, when its reader closed the connection after a
		// reset: the same reset.
		{&net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}, policy.ErrorReset, false},
	}
	for _, tt := range tests {
		k := policy.KindOf(tt.err)
		if k != tt.want || k.ProtocolNack() != tt.nack {
			t.Errorf("KindOf(%v) = %v (nack %v), want %v (nack %v)", tt.err, k, k.ProtocolNack(), tt.want, tt.nack)
		}
	}
}

func TestReqwestPresets(t *testing.T) {
	refused := http2.StreamError{Code: http2.ErrCodeRefusedStream}
	tests := []struct {
		p    policy.Policy
		a    policy.Attempt
		want policy.Decision
	}{
		{presets.ReqwestDefault(), policy.Attempt{Request: request("POST"), Err: refused, Processed: policy.NotSent}, policy.Retry("protocol")},
		{presets.ReqwestDefault(), policy.Attempt{Request: request("GET"), Response: status(503)}, policy.Stop(policy.StopNonRetryable)},
		{presets.ReqwestDefault(), policy.Attempt{Request: request("GET"), Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}, policy.Stop(policy.StopNonRetryable)},
		{presets.ReqwestForHost("h"), policy.Attempt{Request: request("GET"), Response: status(503)}, policy.Stop(policy.StopNonRetryable)},
		{presets.ReqwestForHost("h"), policy.Attempt{Request: request("GET"), Err: refused}, policy.Stop(policy.StopNonRetryable)},
		{policy.Never(), policy.Attempt{Request: request("GET"), Err: refused}, policy.Stop(policy.StopNonRetryable)},
	}
	for _, tt := range tests {
		if got := tt.p.Classify(tt.a); got != tt.want {
			t.Errorf("%s: %v/%v: %+v, want %+v", tt.p.Name, tt.a.Response, tt.a.Err, got, tt.want)
		}
		if err := tt.p.Validate(); err != nil {
			t.Errorf("%s: %v", tt.p.Name, err)
		}
	}
	fh := presets.ReqwestForHost("localhost")
	if fh.Budget.(interface{ Retries() int }).Retries() != 100 || !fh.Scope.FromSecondRetry || fh.MaxAttempts != 3 || fh.Backoff.Base != 0 {
		t.Errorf("for_host: budget %v, scope %+v, attempts %d, backoff %+v", fh.Budget, fh.Scope, fh.MaxAttempts, fh.Backoff)
	}
	if d := presets.ReqwestDefault(); d.Budget != nil || d.MaxAttempts != 3 {
		t.Errorf("reqwest default: budget %v, attempts %d", d.Budget, d.MaxAttempts)
	}
}
