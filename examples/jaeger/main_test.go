package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	if err := run(context.Background(), collector.URL, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if bytes.Load() == 0 {
		t.Error("no spans reached the collector")
	}
}

// A collector that accepts connections and never answers does not hold
// the program: the flush at exit gives up within its bound, and the error
// says how many spans were dropped. (Issue 36: 30 s, in silence.)
func TestRunWithAHungCollector(t *testing.T) {
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers, until the test is over
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer collector.Close()
	defer close(release)
	err := run(context.Background(), collector.URL, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "dropped") || !strings.Contains(err.Error(), "span(s)") {
		t.Fatalf("run: %v; want an error that says what it dropped", err)
	}
	if strings.Contains(err.Error(), "up to 0 span(s)") {
		t.Errorf("run: %v; the run's spans were not counted", err)
	}
}
