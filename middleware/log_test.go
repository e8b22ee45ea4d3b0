package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// logged is what a JSON slog handler wrote, one record a line.
type logged struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logged) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logged) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// levels is each record's "LEVEL message", in order.
func levels(recs []map[string]any) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r["level"].(string)+" "+r["msg"].(string))
	}
	return out
}

// The log layer logs the retries at Debug, and a give-up and its pitfall
// at Warn, with the request's method and host and the events' own
// attributes; never the path, the query or a header. Without a logger it
// logs nothing and passes requests through; at Warn, the retries are not
// even formatted.
func TestLogLayer(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" || n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := policy.Default()
	p.Backoff, p.Budget, p.MaxAttempts = policy.Backoff{}, nil, 3
	client := func(l *slog.Logger) *http.Client {
		e, err := engine.New(engine.Config{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		st, err := middleware.NewStack(middleware.Log(l), e.Layer())
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: st.Then(tr)}
	}
	get := func(c *http.Client, path string) {
		req, _ := http.NewRequest("GET", srv.URL+path+"?token=s3cret", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	var out logged
	c := client(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	get(c, "/ok")
	get(c, "/down")
	recs := out.records(t)
	retry := []string{"DEBUG retrystack.response.discarded", "DEBUG retrystack.retry.backoff"}
	want := slices.Concat(retry, retry, // /ok: 503, 503, 200
		retry, retry, []string{"WARN retrystack.pitfall", "WARN retrystack.give_up"}) // /down: 503 three times

	if got := levels(recs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("logged %v, want %v", got, want)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, r := range recs {
		if r["http.request.method"] != "GET" || r["server.address"] != host {
			t.Errorf("record %v: want the method and host", r)
		}
	}
	if r := recs[1]; r["retrystack.retry.reason"] != "status" || r["retrystack.retry.delay"] != 0.0 {
		t.Errorf("retry record %v: want its reason and delay, the delay a number", r)
	}
	if r := recs[len(recs)-1]; r["retrystack.stop_reason"] != string(policy.StopAttemptsExhausted) {
		t.Errorf("give-up record %v: want its stop reason", r)
	}
	if s := out.buf.String(); strings.Contains(s, "s3cret") || strings.Contains(s, "/down") {
		t.Errorf("the log carries the request's path, query or header: %s", s)
	}

	var warn logged
	get(client(slog.New(slog.NewJSONHandler(&warn, &slog.HandlerOptions{Level: slog.LevelWarn}))), "/down")
	if got := levels(warn.records(t)); strings.Join(got, ",") != "WARN retrystack.pitfall,WARN retrystack.give_up" {
		t.Errorf("at Warn: logged %v", got)
	}
	if l := middleware.Log(nil); l.Wrap(http.DefaultTransport) != http.DefaultTransport {
		t.Error("Log(nil) wraps the transport")
	}
}

// engine.Do's events reach a LogObserver given as its Op's Observer: its
// retries at Debug, its give-up at Warn.
func TestLogObserverForDo(t *testing.T) {
	var out logged
	l := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := policy.Default()
	p.Backoff, p.Budget, p.MaxAttempts = policy.Backoff{}, nil, 2
	e, err := engine.New(engine.Config{Policy: p, Layer: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("stream broken")
	_, rep, err := engine.Do(context.Background(), e, engine.Op[int]{
		Attempt:  func(context.Context, int) (int, error) { return 0, broken },
		Classify: func(int, int, error) policy.Decision { return policy.Retry("stream") },
		Observer: middleware.LogObserver(context.Background(), l),
	})
	if !errors.Is(err, broken) || rep.Stop != policy.StopAttemptsExhausted {
		t.Fatalf("%v, %v", err, rep)
	}
	recs := out.records(t)
	if got := levels(recs); strings.Join(got, ",") != "DEBUG retrystack.retry.backoff,WARN retrystack.give_up" {
		t.Fatalf("logged %v", got)
	}
	if recs[1]["retrystack.layer"] != "stream" {
		t.Errorf("give-up record %v: want its layer", recs[1])
	}
}
