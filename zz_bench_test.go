package retrystack_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

type memRT struct{}

var body64 = bytes.Repeat([]byte("x"), 64)

func (memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body64)), ContentLength: 64, Request: req}, nil
}

func benchClient(b *testing.B, c *http.Client) {
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

func BenchmarkZZ(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchClient(b, &http.Client{Transport: memRT{}}) })
	b.Run("default", func(b *testing.B) {
		c, _ := retrystack.NewClient(retrystack.Config{Transport: memRT{}})
		benchClient(b, c)
	})
	b.Run("retry-only", func(b *testing.B) {
		e, _ := engine.New(engine.Config{Policy: policy.Default()})
		s, _ := middleware.NewStack(e.Layer())
		benchClient(b, &http.Client{Transport: s.Then(memRT{})})
	})
	b.Run("empty-stack", func(b *testing.B) {
		s, _ := middleware.NewStack()
		benchClient(b, &http.Client{Transport: s.Then(memRT{})})
	})
}
