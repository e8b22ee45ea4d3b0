package policy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/policy"
)

// net/http's own HTTP/2 (not x/net's) reports stream errors and GOAWAYs
// with unexported types: KindOf still names them.
func TestKindOfStandardHTTP2Errors(t *testing.T) {
	for _, tt := range []struct {
		fault faultserver.H2Fault
		want  policy.ErrorKind
	}{
		// A GOAWAY that covered the processed stream reaches the caller
		// as net/http's http2GoAwayError. (A refused stream or a reset that
		// net/http cannot resend comes back as a plain error, its reason in
		// the message only: unclassifiable, docs/hidden-retries.md.)
		{faultserver.H2GoAwayProcessed, policy.ErrorGoAway},
		// A stream reset by a proxy whose upstream failed: the request was
		// sent and got no response.
		{faultserver.H2ResetInternalError, policy.ErrorStreamReset},
	} {
		h2, err := faultserver.NewH2(faultserver.H2Config{Faults: []faultserver.H2Fault{tt.fault}})
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		// A replayable POST: what reaches the caller is the error itself,
		// not net/http's message about a body it could not resend.
		req, _ := http.NewRequest("POST", h2.URL()+"/", strings.NewReader("x"))
		_, err = tr.RoundTrip(req)
		tr.CloseIdleConnections()
		h2.Close()
		if err == nil {
			t.Fatalf("%v: no error", tt.fault)
		}
		if got := policy.KindOf(err); got != tt.want {
			t.Errorf("%v: KindOf(%T %v) = %v, want %v", tt.fault, err, err, got, tt.want)
		}
	}
}
