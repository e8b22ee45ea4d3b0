package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The example's spans reach an OTLP/HTTP collector at /v1/traces (a
// stand-in here; the real Jaeger run is scripts/jaeger-e2e.sh).
func TestRun(t *testing.T) {
	var received atomic.Int64
	var wrongPath atomic.Value
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			wrongPath.Store(r.URL.Path)
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
	}))
	defer collector.Close()
	var out bytes.Buffer
	if err := run(context.Background(), &out, collector.URL, "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p := wrongPath.Load(); p != nil {
		t.Errorf("spans posted to %v, not /v1/traces", p)
	}
	if received.Load() == 0 {
		t.Error("no spans reached the collector")
	}
	want := `GET /twice-503         200  3 attempt(s) on the last hop, success
GET /503-then-redirect 200  1 attempt(s) on the last hop, success
GET /always-503        503  3 attempt(s) on the last hop, attempts-exhausted
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// A collector that takes the connection and never answers holds the
// program no longer than the flush bound, and the program says how many
// spans it dropped.
func TestShutdownIsBounded(t *testing.T) {
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer collector.Close()
	defer close(release)
	var out bytes.Buffer
	err := run(context.Background(), &out, collector.URL, "", 50*time.Millisecond)
	if err == nil {
		t.Fatal("no error from a collector that never answered")
	}
	last := out.String()[strings.LastIndex(strings.TrimSuffix(out.String(), "\n"), "\n")+1:]
	// 3 operation spans and 9 attempt spans, none of which got through.
	if last != "12 of 12 spans not exported, dropped: context deadline exceeded\n" {
		t.Errorf("last line %q, want it to say that the 12 spans were dropped", last)
	}
}
