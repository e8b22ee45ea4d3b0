package retrystack_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// BenchmarkSuccessPath compares a bare transport with the default stack on
// a GET that succeeds at once: the cost every request pays.
func BenchmarkSuccessPath(b *testing.B) {
	srv, err := faultserver.New()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	stack, err := retrystack.NewClient(retrystack.Config{Transport: &http.Transport{}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"bare", &http.Client{Transport: &http.Transport{}}}, {"default-stack", stack}} {
		b.Run(c.name, func(b *testing.B) {
			defer c.client.CloseIdleConnections()
			url := srv.URL() + "/s/200?size=64"
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkStackParts takes the success path apart, in memory (no
// network): net/http alone, an empty Stack (the operation, its request
// copy and the trace's context), the retry layer alone, and the default
// stack. docs/benchmarks.md cites it.
func BenchmarkStackParts(b *testing.B) {
	b.Run("bare", func(b *testing.B) { inMemory(b, &http.Client{Transport: memory{}}) })
	b.Run("empty-stack", func(b *testing.B) {
		s, _ := middleware.NewStack()
		inMemory(b, &http.Client{Transport: s.Then(memory{})})
	})
	b.Run("retry-only", func(b *testing.B) {
		e, _ := engine.New(engine.Config{Policy: policy.Default()})
		s, _ := middleware.NewStack(e.Layer())
		inMemory(b, &http.Client{Transport: s.Then(memory{})})
	})
	b.Run("default-stack", func(b *testing.B) {
		c, _ := retrystack.NewClient(retrystack.Config{Transport: memory{}})
		inMemory(b, c)
	})
}

// memory answers every request 200 with a 64 B body, without a network.
type memory struct{}

var body64 = bytes.Repeat([]byte("x"), 64)

func (memory) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body64)), ContentLength: 64, Request: req}, nil
}

func inMemory(b *testing.B, c *http.Client) {
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("GET", "http://memory.test/", nil)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
