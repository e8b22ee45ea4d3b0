package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// The example's spans reach an OTLP/HTTP collector (a stand-in here; the
// real Jaeger run is scripts/jaeger-e2e.sh).
func TestRun(t *testing.T) {
	var bytes atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		bytes.Add(n)
	}))
	defer collector.Close()
	if err := run(context.Background(), collector.URL); err != nil {
		t.Fatal(err)
	}
	if bytes.Load() == 0 {
		t.Error("no spans reached the collector")
	}
}
