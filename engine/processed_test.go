package engine

import (
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
		if got := processedBy(tt.err, tt.wrote); got != tt.want {
			t.Errorf("%s: processedBy = %v, want %v", tt.name, got, tt.want)
		}
		if tt.err != nil {
			if n := testing.AllocsPerRun(100, func() { processedBy(tt.err, true) }); n != 0 {
				t.Errorf("%s: processedBy allocates %v times", tt.name, n)
			}
		}
	}
}
