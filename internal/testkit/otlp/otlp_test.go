package otlp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack/internal/testkit/otlp"
)

// Spans reach an OTLP/HTTP endpoint when the provider is shut down.
func TestNewTracerProvider(t *testing.T) {
	var posts atomic.Int32
	var path atomic.Value
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		path.Store(r.URL.Path)
		posts.Add(1)
	}))
	defer collector.Close()
	tp, err := otlp.NewTracerProvider(context.Background(), "retrylab-test", collector.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 || path.Load() != "/v1/traces" {
		t.Errorf("collector saw %d posts, last to %v", posts.Load(), path.Load())
	}
}
