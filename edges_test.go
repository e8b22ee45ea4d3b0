package retrystack_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// rewinder is a body that can Seek (not ReadAt): its rewinding Seeks
// (whence io.SeekStart) from the failAt-th on fail, as a pipe's or a
// socket's would.
type rewinder struct {
	*strings.Reader
	failAt  int32
	rewinds atomic.Int32
}

func (r *rewinder) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart && r.rewinds.Add(1) >= r.failAt {
		return 0, errors.New("seek: illegal seek")
	}
	return r.Reader.Seek(off, whence)
}
func (r *rewinder) ReadAt()      {} // shadows strings.Reader's: not an io.ReaderAt
func (r *rewinder) Close() error { return nil }

// A PUT whose body can Seek but whose rewinding Seek fails: the replays
// end with body-not-replayable as soon as the rewind fails, and the caller
// gets the answer in hand (the 503 it was sent), with as many attempts as
// the server received; an error, where there is one, names the Seek. On
// the first rewind and on the second. (Issue 36: the report counted 2
// attempts [503 error], stopped non-retryable, and the error spoke of the
// replay buffer.)
func TestFailedRewindEndsTheReplays(t *testing.T) {
	srv := newServer(t)
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		path     string
		failAt   int32 // the rewind that fails
		requests int
		status   int // 0: an error
	}{
		{"first rewind", "/fail/1/503", 1, 1, 503},
		{"second rewind", "/fail/2/503", 2, 2, 503},
		{"first rewind after a reset", "/abort", 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			body := &rewinder{Reader: strings.NewReader("the upload"), failAt: tc.failAt}
			req, _ := http.NewRequest("PUT", srv.URL()+tc.path+"?key="+key, body)
			resp, err := c.Do(req)
			var rep *engine.Report
			if tc.status == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%d, want an error", resp.StatusCode)
				}
				if !strings.Contains(err.Error(), "seek") || !strings.Contains(err.Error(), "rewinding") {
					t.Errorf("the error does not name the Seek: %v", err)
				}
				rep = engine.ReportFrom(err)
			} else {
				if err != nil {
					t.Fatalf("%v, want %d", err, tc.status)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				rep = engine.ReportOf(resp)
			}
			if len(rep.Attempts) != tc.requests || rep.Stop != policy.StopBodyNotReplayable {
				t.Errorf("report %v; want %d attempt(s), %s", rep, tc.requests, policy.StopBodyNotReplayable)
			}
			var sums []string
			for _, e := range srv.Log() {
				if e.Key == key {
					sums = append(sums, e.BodySum)
				}
			}
			if len(sums) != tc.requests {
				t.Errorf("the server received %d requests, want %d", len(sums), tc.requests)
			}
			for _, s := range sums {
				if s != sums[0] || s == "" {
					t.Errorf("the server received bodies %q, want the same each time", sums)
					break
				}
			}
		})
	}
}
