package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A proxy that streams an upload to its upstream (nginx with
// proxy_request_buffering off) answers 502 while the body is still being
// sent. While the engine releases that answer, net/http's writer reads on
// (it waits up to 50 ms for the write to end): it took the body past its
// 256 KiB replay buffer, and the planned retry failed as an attempt that
// never left, stop non-retryable. The writer of a discarded answer reads
// no further: the retry sends the body whole.
func TestEarlyAnswerDoesNotSpendTheReplayBuffer(t *testing.T) {
	u := earlyAnswer(t, 128<<10)
	if u.err != nil {
		t.Fatalf("the upload answered 502 early: %v; want it retried", u.err)
	}
	if u.status != 200 || u.got != u.sum || u.rep.Stop != policy.StopSuccess || len(u.rep.Attempts) != 2 {
		t.Fatalf("status %d, body %.16s…, report %v; want 200 with the whole body's SHA-256 after 2 attempts", u.status, u.got, u.rep)
	}
}

// A read the writer had under way as the retry was decided takes no more
// than the room the buffer has left: 6 KiB here, where net/http's writer
// asks for 32 KiB over HTTP/1.1 and up to 512 KiB over HTTP/2. The retry
// sends the body whole.
func TestReadUnderWayFitsTheBuffer(t *testing.T) {
	u := earlyAnswer(t, 250<<10)
	if u.err != nil || u.status != 200 || u.got != u.sum || len(u.rep.Attempts) != 2 {
		t.Fatalf("error %v, status %d, report %v; want 200 with the whole body's SHA-256 after 2 attempts", u.err, u.status, u.rep)
	}
}

// With the buffer full, the read under way as the retry was decided takes
// the body past it (by its one byte): the retry is not sent, the
// operation stops body-not-replayable with its pitfall, and the budget
// gets the retry back. No attempt is recorded that the server never saw.
func TestBodyLostAfterTheRetryWasPlanned(t *testing.T) {
	u := earlyAnswer(t, 256<<10)
	if u.err == nil {
		t.Fatalf("status %d: want the operation to stop", u.status)
	}
	if u.rep == nil || u.rep.Stop != policy.StopBodyNotReplayable || len(u.rep.Attempts) != 1 || !slices.Contains(u.rep.Pitfalls, PitfallBodyNotReplayable) {
		t.Fatalf("error %v, report %v; want 1 attempt, stop body-not-replayable, its pitfall", u.err, u.rep)
	}
	if u.requests != 1 || u.retries != 2 {
		t.Fatalf("the server saw %d requests and the budget allows %d retries after; want 1, and its stock of 2 whole", u.requests, u.retries)
	}
}

type upload struct {
	status   int
	got, sum string
	rep      *Report
	err      error
	requests int64 // what the server received
	retries  int   // what the budget allows after
}

// earlyAnswer sends a 300 KiB streaming PUT, its first open bytes at once
// and the rest once the engine releases the 502 its server answers when
// the writer waits for more: the release waits until the first attempt's
// writer has stopped, as net/http's does for up to 50 ms.
func earlyAnswer(t *testing.T, open int) upload {
	t.Helper()
	const size = 300 << 10
	data := []byte(strings.Repeat("0123456789abcdef", size/16))
	sum := sha256.Sum256(data)

	var requests atomic.Int64
	body := rttest.NewGatedBody(data, open, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			// The upstream failed before the body ended: 502 at once,
			// and the rest of the body read and thrown away.
			http.NewResponseController(w).EnableFullDuplex()
			io.CopyN(io.Discard, r.Body, int64(open))
			<-body.AtGate() // the writer waits in a read of the body
			w.Header().Set("Content-Length", "16")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "upstream failed\n") // a body: net/http hands the answer over before the write ends
			http.NewResponseController(w).Flush()
			io.Copy(io.Discard, r.Body)
			return
		}
		h := sha256.New()
		io.Copy(h, r.Body)
		io.WriteString(w, hex.EncodeToString(h.Sum(nil)))
	}))
	defer srv.Close()

	defer body.Release()
	firstWritten := make(chan struct{})
	var writes atomic.Int64
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		if writes.Add(1) == 1 {
			close(firstWritten)
		}
	}}

	p := policy.Default()
	e, err := New(Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	base := middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusBadGateway {
			resp.Body = &rttest.CloseHook{ReadCloser: resp.Body, Before: func() { body.Release(); <-firstWritten }}
		}
		return resp, err
	})
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPut, srv.URL+"/upload", body)
	u := upload{sum: hex.EncodeToString(sum[:])}
	resp, err := e.Layer().Wrap(base).RoundTrip(req)
	if err != nil {
		u.err, u.rep = err, ReportFrom(err)
	} else {
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u.status, u.got, u.rep = resp.StatusCode, string(got), ReportOf(resp)
	}
	u.requests = requests.Load()
	u.retries = p.Budget.(interface{ Retries() int }).Retries()
	return u
}
