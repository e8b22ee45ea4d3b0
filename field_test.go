package retrystack_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// stream is an upload as aws-sdk-go-v2 and minio-go send it: a body with
// neither GetBody nor Seek.
type stream struct{ io.Reader }

func (stream) Close() error { return nil }

// Request bodies without GetBody are replayed: a stream from what was
// kept as it was sent, an *os.File by rewinding it; a stream that outgrows
// the replay buffer is sent once, and the operation stops with
// body-not-replayable. The server receives the same bytes each time.
func TestBodiesWithoutGetBodyAreReplayed(t *testing.T) {
	srv := newServer(t)
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr, ReplayLimit: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16) // 100 KiB
	big := bytes.Repeat([]byte("x"), 300<<10)                    // past the 200 KiB limit
	file := filepath.Join(t.TempDir(), "upload")
	if err := os.WriteFile(file, bytes.Repeat(data, 10), 0o600); err != nil { // 1 MiB
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		body     func() io.Reader
		requests int
		status   int
		stop     policy.StopReason
	}{
		{"a stream", func() io.Reader { return stream{bytes.NewReader(data)} }, 2, 200, policy.StopSuccess},
		{"a stream past the replay buffer", func() io.Reader { return stream{bytes.NewReader(big)} }, 1, 503, policy.StopBodyNotReplayable},
		{"an *os.File", func() io.Reader {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}, 2, 200, policy.StopSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			req, _ := http.NewRequest("PUT", srv.URL()+"/fail/1/503?key="+key, tc.body())
			if req.GetBody != nil {
				t.Fatal("the body has a GetBody: not the case under test")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rep := engine.ReportOf(resp)
			if resp.StatusCode != tc.status || rep.Stop != tc.stop {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, rep.Stop, tc.status, tc.stop)
			}
			var sums []string
			for _, e := range srv.Log() {
				if e.Key == key {
					sums = append(sums, e.BodySum)
				}
			}
			if len(sums) != tc.requests || sums[0] == "" || (len(sums) == 2 && sums[0] != sums[1]) {
				t.Errorf("the server received bodies %q, want %d of the same", sums, tc.requests)
			}
		})
	}
}

// Under NewTransport the http.Client's own Jar stores the cookie a
// retried-away response set: the retry layer carries its Set-Cookie onto
// the final response. When the operation ends in an error instead,
// nothing can carry it, and the pitfall names it.
func TestCookiesUnderNewTransport(t *testing.T) {
	srv := newServer(t)
	p := policy.Default()
	p.Backoff = policy.Backoff{}
	var pitfalls []engine.Event
	var mu sync.Mutex
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p, Hooks: engine.Hooks{OnPitfall: func(ev engine.Event) {
		mu.Lock()
		pitfalls = append(pitfalls, ev)
		mu.Unlock()
	}}})
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: rt, Jar: jar}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("POST", srv.URL()+"/login?key=under-transport", strings.NewReader("user=a"))
	req.Header.Set("Idempotency-Key", `"login-1"`)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if rep := engine.ReportOf(resp); len(rep.Attempts) != 2 {
		t.Fatalf("report %v, want 2 attempts", rep)
	}
	resp, err = c.Get(srv.URL() + "/me?key=under-transport")
	if err != nil {
		t.Fatal(err)
	}
	me, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(me); got != "lb=node-2; session=abc" && got != "session=abc; lb=node-2" {
		t.Errorf("/me received %q, want both cookies", got)
	}
	if len(pitfalls) != 0 {
		t.Errorf("pitfalls %v, want none: nothing was lost", pitfalls)
	}

	// 503 with a cookie, then the connection dropped every time: the
	// caller gets an error, and the cookie is named lost.
	var n atomic.Int32
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.SetCookie(w, &http.Cookie{Name: "lb", Value: "node-2"})
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer drop.Close()
	if _, err := c.Get(drop.URL); err == nil {
		t.Fatal("no error")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pitfalls) != 1 || pitfalls[0].Pitfall != engine.PitfallCookieLost || len(pitfalls[0].Cookies) != 1 || pitfalls[0].Cookies[0] != "lb" {
		t.Errorf("pitfalls %+v, want cookie-lost [lb]", pitfalls)
	}
}

// An upload whose producer stalls (an SDK's pipe) over HTTP/2: the attempt
// times out, the transport closes the body to abort its Read, and Do
// returns by the caller's deadline, as it does without the stack. (Found by
// review: the replay held its lock across the stalled Read, and Do never
// returned.)
func TestStalledUploadOverHTTP2Returns(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := srv.Client().Transport.(*http.Transport)
	defer tr.CloseIdleConnections()
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	p.AttemptTimeout = 100 * time.Millisecond
	c, err := retrystack.NewClient(retrystack.Config{Policy: &p, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("hello")) // then nothing more
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL, pr)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stalled upload succeeded")
		}
	case <-time.After(30 * time.Second): // a hang detector, not a timing verdict
		t.Fatal("Do never returned: the stalled upload held the stack")
	}
}
