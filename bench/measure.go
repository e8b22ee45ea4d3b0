package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/policy"
)

// postBody is the 64 KiB replayable body of the POST measurements.
var postBody = bytes.Repeat([]byte("x"), 64<<10)

// Server starts a fault server that b's cleanup closes, with every
// connection still open to it.
func Server(b *testing.B) *faultserver.Server {
	srv, err := faultserver.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv
}

// client builds lib's client over a fresh transport, or fails b.
func client(b *testing.B, lib Lib, m Mode) *http.Client {
	b.Helper()
	c, err := lib.New(&http.Transport{MaxIdleConnsPerHost: 64}, m)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return c
}

func do(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// GET measures a GET answered 200 with a 64 B body; parallel runs it from
// GOMAXPROCS goroutines.
func GET(b *testing.B, srv *faultserver.Server, lib Lib, parallel bool) {
	c := client(b, lib, Mode{})
	url := srv.URL() + "/s/200?size=64"
	run(b, parallel, func() error {
		req, _ := http.NewRequest("GET", url, nil)
		return do(c, req)
	})
}

// POST measures a POST of a replayable 64 KiB body answered 200.
func POST(b *testing.B, srv *faultserver.Server, lib Lib, parallel bool) {
	c := client(b, lib, Mode{})
	url := srv.URL() + "/s/200?size=64"
	run(b, parallel, func() error {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(postBody))
		return do(c, req)
	})
}

// PutStream measures a PUT whose body is a stream of size bytes with
// neither GetBody nor Seek (what aws-sdk-go-v2 and minio-go send), on the
// success path: retrystack keeps it as it is sent, up to its replay
// limit, in a buffer it reuses.
func PutStream(b *testing.B, srv *faultserver.Server, lib Lib, size int) {
	c := client(b, lib, Mode{})
	url := srv.URL() + "/s/200?size=64"
	data := bytes.Repeat([]byte("x"), size)
	run(b, false, func() error {
		req, _ := http.NewRequest("PUT", url, io.NopCloser(bytes.NewReader(data)))
		return do(c, req)
	})
}

// Overhead measures a GET over a transport that answers from memory: the
// library's own cost per request, without the loopback round trip whose
// noise hides it in GET.
func Overhead(b *testing.B, lib Lib) {
	c, err := lib.New(memory{}, Mode{})
	if err != nil {
		b.Fatal(err)
	}
	run(b, false, func() error {
		req, _ := http.NewRequest("GET", "http://memory.test/", nil)
		return do(c, req)
	})
}

// memory answers every request 200 with a 64 B body, without a network.
type memory struct{}

var body64 = bytes.Repeat([]byte("x"), 64)

func (memory) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body64)), ContentLength: 64, Request: req,
	}, nil
}

// Retry measures a GET the server answers 503, 503, then 200, with every
// wait at zero and no budget: only the retrying costs.
func Retry(b *testing.B, srv *faultserver.Server, lib Lib) {
	c := client(b, lib, Mode{ZeroWait: true, NoBudget: true})
	var n atomic.Int64
	run(b, false, func() error {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/fail/2/503?key=%s-%d", srv.URL(), lib.Name, n.Add(1)), nil)
		return do(c, req)
	})
}

func run(b *testing.B, parallel bool, op func() error) {
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// StormResult is what a storm did to the server and what it left behind.
type StormResult struct {
	Amplification   float64 // server hits ÷ logical requests
	Dials           int     // connections the server accepted: a pool thrown away shows here
	OpenConnsAfter  int     // server-side connections still open after the run
	GoroutinesAfter int     // goroutines above the count before the run
}

// Storm sends 1000 GETs, 50 at a time, to a server that always fails as
// fault says ("503", "500" or "reset"), every wait scaled to zero, and
// measures the amplification and what is left open afterwards.
func Storm(lib Lib, fault string) (StormResult, error) {
	path := map[string]string{"503": "/s/503", "500": "/s/500", "reset": "/abort?reset=1"}[fault]
	if path == "" {
		return StormResult{}, fmt.Errorf("bench: unknown fault %q", fault)
	}
	srv, err := faultserver.New()
	if err != nil {
		return StormResult{}, err
	}
	defer srv.Close()
	before := runtime.NumGoroutine()
	c, err := lib.New(&http.Transport{MaxIdleConnsPerHost: 64}, Mode{ZeroWait: true})
	if err != nil {
		return StormResult{}, err
	}
	const total, concurrency = 1000, 50
	var wg sync.WaitGroup
	var next atomic.Int64
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= total {
				req, _ := http.NewRequest("GET", srv.URL()+path, nil)
				do(c, req) // every outcome is a failure here: only the server's count matters
			}
		}()
	}
	wg.Wait()
	c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.WaitIdle(ctx)
	return StormResult{
		Amplification:   float64(len(srv.Log())) / total,
		Dials:           srv.Accepted(),
		OpenConnsAfter:  settle(srv.OpenConns, 0),
		GoroutinesAfter: settle(runtime.NumGoroutine, before) - before,
	}, nil
}

// settle gives closing connections and ending goroutines up to a second to
// go, then returns what count says: what is left is left for good.
func settle(count func() int, floor int) int {
	deadline := time.Now().Add(time.Second)
	for count() > floor && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return max(count(), floor)
}

// PostSends reports how many times one POST reaches a server that writes
// it and then answers 503.
func PostSends(lib Lib) (int, error) {
	srv, err := faultserver.New()
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	c, err := lib.New(&http.Transport{}, Mode{ZeroWait: true})
	if err != nil {
		return 0, err
	}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("POST", srv.URL()+"/orders", strings.NewReader(`{"item":1}`))
	do(c, req)
	return srv.Stats("/orders", "").Processed, nil
}

// Decision measures the retry decision on the success path.
func Decision(b *testing.B) {
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	decide(b, policy.Attempt{Request: req, Response: &http.Response{StatusCode: 200}, Number: 1, Processed: policy.Responded})
}

// DecisionOnReset measures the retry decision on a connection reset, as
// net/http returns it: the error is classified through its whole chain.
func DecisionOnReset(b *testing.B) {
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	err := &url.Error{Op: "Get", URL: req.URL.String(), Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	decide(b, policy.Attempt{Request: req, Err: err, Number: 1, Processed: policy.SentNoResponse})
}

func decide(b *testing.B, a policy.Attempt) {
	classify := policy.Default().Classify
	b.ReportAllocs()
	for b.Loop() {
		classify(a)
	}
}

// Budget measures policy.Default()'s budget under parallel deposits and
// withdrawals.
func Budget(b *testing.B) {
	budget := policy.Default().Budget // the earned budget
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if i%5 == 0 {
				budget.Withdraw()
			} else {
				budget.Deposit()
			}
		}
	})
}
