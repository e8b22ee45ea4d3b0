package engine

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/retrystack/retrystack/policy"
	"golang.org/x/net/http2"
)

func TestProcessedBy(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		wrote bool
		want  policy.Processed
	}{
		{"response", nil, true, policy.Responded},
		{"dial refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false, policy.NotSent},
		{"dial error even if a trace said written", &net.OpError{Op: "dial", Err: errors.New("x")}, true, policy.NotSent},
		{"refused stream after the headers", http2.StreamError{Code: http2.ErrCodeRefusedStream}, true, policy.NotSent},
		{"nothing written", errors.New("boom"), false, policy.NotSent},
		{"reset after write", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true, policy.SentNoResponse},
		//lint:ignore SA1019 x/net's HTTP/2 Transport still returns it
		{"goaway covering the stream", http2.GoAwayError{LastStreamID: 1, ErrCode: http2.ErrCodeNo}, true, policy.SentNoResponse},
	}
	for _, tt := range tests {
		if got := processedBy(tt.err, tt.wrote, false); got != tt.want {
			t.Errorf("%s: processedBy = %v, want %v", tt.name, got, tt.want)
		}
		if tt.err != nil {
			if n := testing.AllocsPerRun(100, func() { processedBy(tt.err, true, true) }); n != 0 {
				t.Errorf("%s: processedBy allocates %v times", tt.name, n)
			}
		}
	}
}

// An attempt cut off by its context once it had a connection may have
// left before the transport reported the write: it counts as sent. Before
// it had a connection, nothing left.
func TestCutOffAfterTheConnection(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		gotConn bool
		want    policy.Processed
	}{
		{"deadline with a connection", context.DeadlineExceeded, true, policy.SentNoResponse},
		{"cancelled with a connection", context.Canceled, true, policy.SentNoResponse},
		{"deadline before a connection", context.DeadlineExceeded, false, policy.NotSent},
		{"another error with a connection, nothing written", errors.New("boom"), true, policy.NotSent},
		{"dial cut off", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}, true, policy.NotSent},
	} {
		if got := processedBy(tt.err, false, tt.gotConn); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
