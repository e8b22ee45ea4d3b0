package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// The SDK rows of issue 43: a client that is alone, behind an SDK whose
// own retries are off (README, "Inside an SDK"), facing a stall or
// S3's SlowDown. Default keeps a timed-out attempt's retry for a client
// with recent successes (the fleet's side) and says so; Alone retries it.

// fault is what the scripted front does to one request instead of
// forwarding it.
type fault int

const (
	// stallHeaders answers nothing until the request ends (the client
	// gave up on it) or the test does.
	stallHeaders fault = iota + 1
	// stallUpload reads the first stallAfter bytes of the body, then
	// reads no more and answers nothing until the test ends: HTTP/1's
	// server notices the client leaving only once the body is read.
	stallUpload
	// slowDown is S3's 503 SlowDown, with its XML error.
	slowDown
	// unavailable is a bare 503.
	unavailable
)

// stallAfter is how much of an upload stallUpload reads.
const stallAfter = 64 << 10

// script sits in front of a faultProxy (which checks SigV4) and an
// in-process S3: the next requests of a method and path meet the faults
// planned for them, in order; the others are forwarded.
type script struct {
	next http.Handler
	done <-chan struct{} // closed when the test ends

	mu      sync.Mutex
	plan    map[string][]fault
	faulted map[string]int      // method+path: requests met by a fault
	auth    map[string][]string // method+path: the Authorization of each request, in order
	read    []int               // bytes of the body each stallUpload read
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.auth[key] = append(s.auth[key], r.Header.Get("Authorization"))
	var f fault
	if p := s.plan[key]; len(p) > 0 {
		f, s.plan[key] = p[0], p[1:]
		s.faulted[key]++
	}
	s.mu.Unlock()
	switch f {
	case 0:
		s.next.ServeHTTP(w, r)
	case stallHeaders:
		s.stall(r)
	case stallUpload:
		n, _ := io.ReadFull(r.Body, make([]byte, stallAfter))
		s.mu.Lock()
		s.read = append(s.read, n)
		s.mu.Unlock()
		s.stall(r)
	case slowDown:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>%s</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>`, r.URL.Path)
	case unavailable:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// stall blocks until r's context ends or the test does.
func (s *script) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// fail plans faults for the next requests of method and path.
func (s *script) fail(method, path string, faults ...fault) {
	s.mu.Lock()
	s.plan[method+" "+path] = append(s.plan[method+" "+path], faults...)
	s.mu.Unlock()
}

// stallS3 is an in-process S3 behind a faultProxy that checks every
// forwarded request's SigV4 signature (re-signing it), behind a script:
// the script, the proxy and the URL to send to.
func stallS3(t *testing.T) (*script, *faultProxy, string) {
	t.Helper()
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(s3srv.Close)
	target, _ := url.Parse(s3srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport(t)
	fp := newFaultProxy(t, rp, true)
	fp.resign = true
	done := make(chan struct{})
	sc := &script{next: fp, done: done, plan: map[string][]fault{}, faulted: map[string]int{}, auth: map[string][]string{}}
	front := httptest.NewServer(sc)
	t.Cleanup(front.Close)
	t.Cleanup(func() { close(done) }) // first: Close waits for the stalled handlers
	return sc, fp, front.URL
}

// s3Client is aws-sdk-go-v2's S3 client of the server at base over hc,
// its own retries off.
func s3Client(base string, hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		Credentials:  s3Creds,
		BaseEndpoint: aws.String(base),
		UsePathStyle: true,
		HTTPClient:   hc,
		Retryer:      aws.NopRetryer{},
	})
}

// recorder keeps what the hooks saw.
type recorder struct {
	mu      sync.Mutex
	retries []string // "cause after status-or-error", one per retry
	gaveUp  []policy.StopReason
}

func (r *recorder) hooks() engine.Hooks {
	return engine.Hooks{
		OnRetry: func(ev engine.Event) {
			a := ev.Report.Attempts[ev.Number-1]
			what := fmt.Sprint(a.Status)
			if a.Err != nil {
				what = "error"
			}
			r.mu.Lock()
			r.retries = append(r.retries, ev.Cause+" after "+what)
			r.mu.Unlock()
		},
		OnGiveUp: func(rep *engine.Report) { r.mu.Lock(); r.gaveUp = append(r.gaveUp, rep.Stop); r.mu.Unlock() },
	}
}

func (r *recorder) get() (retries []string, gaveUp []policy.StopReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.retries...), append([]policy.StopReason(nil), r.gaveUp...)
}

// timed is p with an attempt timeout of 300 ms, and its waits scaled
// down for tests as fast's are.
func timed(p policy.Policy) *policy.Policy {
	p.AttemptTimeout = 300 * time.Millisecond
	p.Backoff.Base = time.Millisecond
	p.Backoff.Cap = 5 * time.Millisecond
	return &p
}

// position is a body that tells how far it has been read.
type position struct {
	r   *bytes.Reader
	pos atomic.Int64
}

func (p *position) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos.Add(int64(n))
	return n, err
}

func (p *position) Seek(off int64, whence int) (int64, error) {
	n, err := p.r.Seek(off, whence)
	p.pos.Store(n)
	return n, err
}

// smallSendBuffer dials with a send buffer of 16 KiB, which the kernel
// does not grow: a slow uplink, whose upload is still being written
// when the server stops reading it.
func smallSendBuffer(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := c.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkRefusal checks err is Default's refusal to retry a timed-out
// attempt: an *engine.Error whose report stops timeout-not-retried after
// the one attempt, and whose text names the way out.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error: the stalled attempt was retried (or never stalled)")
	}
	ee, ok := errors.AsType[*engine.Error](err)
	if !ok {
		t.Fatalf("errors.As finds no *engine.Error in %v", err)
	}
	if ee.Report.Stop != policy.StopTimeoutNotRetried || len(ee.Report.Attempts) != 1 || ee.Report.Attempts[0].Err == nil {
		t.Errorf("report %v, want one attempt that failed, stop %s", ee.Report, policy.StopTimeoutNotRetried)
	}
	if rep := engine.ReportFrom(err); rep != ee.Report {
		t.Errorf("engine.ReportFrom finds %v, not the error's report", rep)
	}
	if !ee.Timeout() {
		t.Error("the error does not read as a timeout")
	}
	for _, want := range []string{"timeout-not-retried", "policy.Alone()", "Idempotency-Key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the SDK's error does not mention %q: %v", want, err)
		}
	}
}

// aws-sdk-go-v2's GetObject whose first attempt's response headers
// stall, AttemptTimeout 300 ms, the SDK's retries off: Default does not
// retry the timeout for a client of a handful of requests and says so
// (timeout-not-retried, naming policy.Alone()); Alone retries it, and the
// object arrives whole, the retry the request the SDK signed.
func TestS3GetObjectStalledHeaders(t *testing.T) {
	data := bytes.Repeat([]byte("lone client "), 10_000) // 120 KB
	for _, c := range []struct {
		name string
		p    policy.Policy
		ok   bool
	}{{"default", policy.Default(), false}, {"alone", policy.Alone(), true}} {
		t.Run(c.name, func(t *testing.T) {
			sc, fp, front := stallS3(t)
			ctx := context.Background()
			setup := s3Client(front, &http.Client{Transport: transport(t)})
			if _, err := setup.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("lone")}); err != nil {
				t.Fatal(err)
			}
			if _, err := setup.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lone"), Key: aws.String("obj"), Body: bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}

			var rec recorder
			rt, err := retrystack.NewTransport(retrystack.Config{Policy: timed(c.p), Transport: transport(t), Hooks: rec.hooks()})
			if err != nil {
				t.Fatal(err)
			}
			client := s3Client(front, &http.Client{Transport: rt})
			sc.fail("GET", "/lone/obj", stallHeaders)
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lone"), Key: aws.String("obj")})
			retries, gaveUp := rec.get()
			if !c.ok {
				checkRefusal(t, err)
				if fp.count("GET", "/lone/obj") != 0 || len(retries) != 0 || fmt.Sprint(gaveUp) != "[timeout-not-retried]" {
					t.Errorf("%d GETs reached S3, retries %v, gave up %v; want 0, none, [timeout-not-retried]", fp.count("GET", "/lone/obj"), retries, gaveUp)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			got, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("the object came back with %d bytes (%v), not the %d stored", len(got), err, len(data))
			}
			if fp.count("GET", "/lone/obj") != 1 || fmt.Sprint(retries) != "[timeout after error]" || len(gaveUp) != 0 {
				t.Errorf("%d GETs reached S3, retries %v, gave up %v; want 1, [timeout after error], none", fp.count("GET", "/lone/obj"), retries, gaveUp)
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if a := sc.auth["GET /lone/obj"]; len(a) != 2 || a[0] != a[1] || sc.faulted["GET /lone/obj"] != 1 {
				t.Errorf("%d GETs sent, %d stalled; want 2, 1, the second the same signed request", len(a), sc.faulted["GET /lone/obj"])
			}
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if len(fp.badSig) > 0 {
				t.Errorf("badly signed: %v", fp.badSig)
			}
		})
	}
}

// aws-sdk-go-v2's PutObject whose first attempt stalls mid-upload: the
// server reads 64 KiB of it, then nothing more. Its body has no GetBody
// and cannot Seek (the SDK wraps it): the retry replays it from what the
// stack kept as it was sent. Default does not retry the timeout and
// nothing is stored; Alone retries it, and the stored object is the one
// sent. Over loopback's socket buffers the first attempt's 200 KB (within
// the default ReplayLimit, 256 KiB) is all written before the server
// stops reading; over a slow uplink (a send buffer of 16 KiB) 1 MiB, with
// ReplayLimit raised to match, is still being written when the attempt
// times out, and the retry sends what was kept, then reads on.
func TestS3PutObjectStalledMidUpload(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     policy.Policy
		size  int
		limit int64
		ok    bool
		slow  bool // a small send buffer: a slow uplink
	}{
		{"default", policy.Default(), 200_000, 0, false, false},
		{"alone", policy.Alone(), 200_000, 0, true, false},
		{"alone/1MiB/slow uplink", policy.Alone(), 1 << 20, 1 << 20, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, fp, front := stallS3(t)
			ctx := context.Background()
			setup := s3Client(front, &http.Client{Transport: transport(t)})
			if _, err := setup.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("lone")}); err != nil {
				t.Fatal(err)
			}
			data := make([]byte, c.size)
			for i := range data {
				data[i] = byte(i*7 + i/251)
			}

			var rec recorder
			body := &position{r: bytes.NewReader(data)}
			var atRetry atomic.Int64 // how far the first attempt read the body
			hooks := rec.hooks().Join(engine.Hooks{OnRetry: func(engine.Event) { atRetry.Store(body.pos.Load()) }})
			base := transport(t)
			if c.slow {
				base.DialContext = smallSendBuffer
			}
			rt, err := retrystack.NewTransport(retrystack.Config{Policy: timed(c.p), Transport: base, Hooks: hooks, ReplayLimit: c.limit})
			if err != nil {
				t.Fatal(err)
			}
			client := s3Client(front, &http.Client{Transport: rt})
			sc.fail("PUT", "/lone/obj", stallUpload)
			_, putErr := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lone"), Key: aws.String("obj"), Body: body})
			retries, gaveUp := rec.get()
			sc.mu.Lock()
			read := fmt.Sprint(sc.read)
			sc.mu.Unlock()
			if read != fmt.Sprint([]int{stallAfter}) {
				t.Errorf("the stalled upload read %s bytes, want [%d]", read, stallAfter)
			}
			out, getErr := setup.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lone"), Key: aws.String("obj")})
			if !c.ok {
				checkRefusal(t, putErr)
				if fp.count("PUT", "/lone/obj") != 0 || len(retries) != 0 || fmt.Sprint(gaveUp) != "[timeout-not-retried]" {
					t.Errorf("%d PUTs reached S3, retries %v, gave up %v; want 0, none, [timeout-not-retried]", fp.count("PUT", "/lone/obj"), retries, gaveUp)
				}
				if getErr == nil {
					out.Body.Close()
				}
				if _, ok := errors.AsType[*s3types.NoSuchKey](getErr); !ok {
					t.Errorf("after the refused upload GetObject says %v, want NoSuchKey", getErr)
				}
				return
			}
			if putErr != nil {
				t.Fatalf("PutObject: %v", putErr)
			}
			t.Logf("the first attempt read %d of the body's %d bytes", atRetry.Load(), c.size)
			if n := atRetry.Load(); c.slow && n >= int64(c.size) {
				t.Errorf("the first attempt read the whole body (%d bytes) before it timed out: not a stall mid-upload", n)
			}
			if getErr != nil {
				t.Fatalf("GetObject: %v", getErr)
			}
			got, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("the stored object has %d bytes (%v), not the %d sent", len(got), err, len(data))
			}
			if fp.count("PUT", "/lone/obj") != 1 || fmt.Sprint(retries) != "[timeout after error]" || len(gaveUp) != 0 {
				t.Errorf("%d PUTs reached S3, retries %v, gave up %v; want 1, [timeout after error], none", fp.count("PUT", "/lone/obj"), retries, gaveUp)
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if a := sc.auth["PUT /lone/obj"]; len(a) != 2 || a[0] != a[1] {
				t.Errorf("%d PUTs sent; want 2, the second the same signed request", len(a))
			}
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if len(fp.badSig) > 0 {
				t.Errorf("badly signed: %v", fp.badSig)
			}
		})
	}
}

// minio-go, a new client over NewTransport (its own retries off:
// MaxRetries 1): StatObject, then GetObject, each answered S3's SlowDown
// and a 503 before a 200. Both succeed under Default: the HEAD's two
// retries ended in success and were paid back, so the GET has its stock
// whole; and under Alone.
func TestMinioStatThenGetThroughSlowDown(t *testing.T) {
	data := bytes.Repeat([]byte("slow down "), 10_000) // 100 KB
	for _, c := range []struct {
		name string
		p    policy.Policy
	}{{"default", policy.Default()}, {"alone", policy.Alone()}} {
		t.Run(c.name, func(t *testing.T) {
			sc, fp, front := stallS3(t)
			ctx := context.Background()
			setup := s3Client(front, &http.Client{Transport: transport(t)})
			if _, err := setup.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("lone")}); err != nil {
				t.Fatal(err)
			}
			if _, err := setup.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lone"), Key: aws.String("obj"), Body: bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}

			var rec recorder
			p := c.p
			p.Backoff.Base, p.Backoff.Cap = time.Millisecond, 5*time.Millisecond
			rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: transport(t), Hooks: rec.hooks()})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(front)
			creds, _ := s3Creds.Retrieve(ctx)
			mc, err := minio.New(u.Host, &minio.Options{
				Creds:        miniocreds.NewStaticV4(creds.AccessKeyID, creds.SecretAccessKey, ""),
				Region:       "us-east-1",
				Transport:    rt,
				MaxRetries:   1,
				BucketLookup: minio.BucketLookupPath,
			})
			if err != nil {
				t.Fatal(err)
			}
			sc.fail("HEAD", "/lone/obj", slowDown, unavailable)
			sc.fail("GET", "/lone/obj", slowDown, unavailable)
			info, err := mc.StatObject(ctx, "lone", "obj", minio.StatObjectOptions{})
			if err != nil {
				t.Fatalf("StatObject: %v", err)
			}
			if info.Size != int64(len(data)) {
				t.Errorf("StatObject says %d bytes, want %d", info.Size, len(data))
			}
			obj, err := mc.GetObject(ctx, "lone", "obj", minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			got, err := io.ReadAll(obj)
			obj.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("GetObject read %d bytes (%v), want the %d stored", len(got), err, len(data))
			}
			retries, gaveUp := rec.get()
			if want := "[status after 503 status after 503 status after 503 status after 503]"; fmt.Sprint(retries) != want || len(gaveUp) != 0 {
				t.Errorf("retries %v, gave up %v; want %s, none", retries, gaveUp, want)
			}
			if fp.count("HEAD", "/lone/obj") != 1 || fp.count("GET", "/lone/obj") != 1 {
				t.Errorf("%d HEADs, %d GETs reached S3; want 1, 1", fp.count("HEAD", "/lone/obj"), fp.count("GET", "/lone/obj"))
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			if sc.faulted["HEAD /lone/obj"] != 2 || sc.faulted["GET /lone/obj"] != 2 {
				t.Errorf("faults met: %v, want 2 for the HEAD and 2 for the GET", sc.faulted)
			}
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if len(fp.badSig) > 0 {
				t.Errorf("badly signed: %v", fp.badSig)
			}
		})
	}
}
