package retrystack_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// A PUT whose connection the server resets mid-upload gets the same
// decision every time: net/http's reader and writer goroutines race, and
// whichever sees the reset first, the error is a reset of a request that
// was sent (not "use of closed network connection", an error of no known
// kind). Fifty runs: each is retried once and arrives whole.
func TestUploadResetMidBodyIsRetriedEveryTime(t *testing.T) {
	srv := newServer(t)
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16) // 2 MiB
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	notRetried := 0
	for i := range 50 {
		key := fmt.Sprintf("reset-%d", i)
		req, _ := http.NewRequest("PUT", srv.URL()+"/upload?key="+key, bytes.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			notRetried++
			t.Logf("PUT %d: %v (report %v)", i, err, engine.ReportFrom(err))
			continue
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rep := engine.ReportOf(resp)
		if resp.StatusCode != 200 || string(got) != want || len(rep.Attempts) != 2 || rep.Attempts[0].Processed != policy.SentNoResponse {
			t.Errorf("PUT %d: %d %q, report %v", i, resp.StatusCode, got, rep)
		}
		if n := srv.Stats("/upload", key).Requests; n != 2 {
			t.Errorf("PUT %d: the server saw %d requests, want 2", i, n)
		}
	}
	if notRetried > 0 {
		t.Errorf("%d of 50 PUTs were not retried", notRetried)
	}
}
