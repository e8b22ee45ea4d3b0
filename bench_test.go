package retrystack_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/internal/faultserver"
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
