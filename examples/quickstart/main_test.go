package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
)

// README's first program, as a reader runs it: against a server that
// fails once, with a collector at OTEL_EXPORTER_OTLP_ENDPOINT. It prints
// the retried answer and its report, and the spans reach the collector.
func TestQuickstart(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var mu sync.Mutex
	var posted []byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/traces" {
			posted = append(posted, b...)
		}
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	out := stdout(t, func() {
		args := os.Args
		defer func() { os.Args = args }()
		os.Args = []string{"quickstart", srv.URL}
		main()
	})
	if !regexp.MustCompile(`^200 OK default: 2 attempts \[503 200\], waits \[[0-9.]+[µm]?s\], success\n$`).MatchString(out) {
		t.Errorf("printed %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(posted, []byte("retrystack GET")) {
		t.Errorf("the collector got no operation span (%d bytes at /v1/traces)", len(posted))
	}
}

// stdout returns what f prints.
func stdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	f()
	os.Stdout = saved
	w.Close()
	return string(<-done)
}
