package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/middleware"
	"go.uber.org/goleak"
)

// The chaos layer in every position: above the retry layer (it fails
// operations), inside it (it fails attempts, which the retry layer
// rescues), below a hedge inside it × each fault × HTTP/1.1 and h2c; a
// latency the caller cancels; a reset over a layer below that panics;
// bodies cut and stalled. In every cell the caller gets what the fault
// means in that position, the server sees what was sent, and nothing is
// left: no goroutine, no connection.
func TestChaosInEveryPosition(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		for _, pos := range []string{"above-retry", "inside-retry", "below-hedge"} {
			for _, kind := range []string{"status", "refuse", "reset", "latency", "latency-cancel", "reset-panic", "cut-body", "stall-body"} {
				t.Run(fmt.Sprintf("%s/%s/%s", proto, pos, kind), func(t *testing.T) {
					runChaosCell(t, proto, pos, kind)
				})
			}
		}
	}
}

type chaosServer struct {
	seen atomic.Int32

	rttest.Conns // the server's open connections
}

func (s *chaosServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.seen.Add(1)
	io.Copy(io.Discard, r.Body)
	io.WriteString(w, "hello world")
}

func runChaosCell(t *testing.T, proto, pos, kind string) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := &chaosServer{}
	ts, tr := rttest.Server(srv, proto == "h2c", &srv.Conns)
	defer ts.Close()

	f := chaos.Fault{Rate: 1, Attempts: 1}
	switch kind {
	case "status":
		f.Kind, f.Status = chaos.Status, 503
	case "refuse":
		f.Kind = chaos.Refuse
	case "reset", "reset-panic":
		f.Kind = chaos.Reset
	case "latency":
		f.Kind, f.Delay = chaos.Latency, time.Millisecond
	case "latency-cancel":
		f.Kind, f.Delay = chaos.Latency, time.Hour
	case "cut-body":
		f.Kind, f.After = chaos.CutBody, 5
	case "stall-body":
		f.Kind, f.After = chaos.StallBody, 5
	}
	injected := make(chan struct{}, 8)
	rec := &recorder{}
	watch := middleware.Layer{Name: "watch", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if op, ok := middleware.OperationOf(req.Context()); ok {
				op.Observe(rec)
				op.Observe(observerFunc(func(e middleware.Event) {
					if e.Name == middleware.EventChaos {
						injected <- struct{}{}
					}
				}))
			}
			return next.RoundTrip(req)
		})
	}}
	below := middleware.Layer{Name: "below", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if kind == "reset-panic" {
				panic("below chaos")
			}
			return next.RoundTrip(req)
		})
	}}
	e, err := engine.New(engine.Config{Policy: noWaits()})
	if err != nil {
		t.Fatal(err)
	}
	c := chaos.Layer(chaos.Config{Faults: []chaos.Fault{f}})
	var layers []middleware.Layer
	switch pos {
	case "above-retry":
		layers = []middleware.Layer{watch, c, e.Layer(), below}
	case "inside-retry":
		layers = []middleware.Layer{watch, e.Layer(), c, below}
	case "below-hedge":
		layers = []middleware.Layer{watch, e.Layer(), hedge.Layer(hedge.Config{Delay: time.Hour}), c, below}
	}
	s, err := middleware.NewStack(layers...)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: s.Then(tr)}
	defer srv.WaitClosed(t, client.CloseIdleConnections)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if kind == "latency-cancel" {
		go func() { <-injected; cancel() }() // in the latency: the caller gives up
	}
	var (
		status    int
		body      string
		err2      error
		recovered any
	)
	func() {
		defer func() { recovered = recover() }()
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL, nil)
		resp, err := client.Do(req)
		err2 = err
		if err != nil {
			return
		}
		status = resp.StatusCode
		defer resp.Body.Close()
		if kind == "stall-body" {
			head := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				err2 = err
				return
			}
			body = string(head)
			cancel() // the rest stalls until the caller gives up
		}
		b, err := io.ReadAll(resp.Body)
		body += string(b)
		err2 = err
	}()

	above := pos == "above-retry"
	want := struct {
		status int
		body   string
		seen   int32
		err    func(error) bool
	}{200, "hello world", 1, func(err error) bool { return err == nil }}
	switch kind {
	case "status":
		if above {
			want.status, want.body, want.seen = 503, "", 0
		}
	case "refuse":
		if above {
			want.status, want.body, want.seen = 0, "", 0
			want.err = func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
		}
	case "reset":
		want.seen = 2
		if above {
			want.status, want.body, want.seen = 0, "", 1
			want.err = func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
		}
	case "latency-cancel":
		want.status, want.body, want.seen = 0, "", 0
		want.err = func(err error) bool { return errors.Is(err, context.Canceled) }
	case "reset-panic":
		want.status, want.body, want.seen = 0, "", 0
		want.err = func(err error) bool { return err == nil }
		if recovered != "below chaos" {
			t.Errorf("recovered %v; want the panic's own value", recovered)
		}
	case "cut-body":
		want.body = "hello"
		want.err = func(err error) bool {
			return errors.Is(err, io.ErrUnexpectedEOF) && strings.Contains(err.Error(), "chaos: injected")
		}
	case "stall-body":
		want.body = "hello"
		want.err = func(err error) bool { return errors.Is(err, context.Canceled) }
	}
	if kind != "reset-panic" && recovered != nil {
		t.Errorf("panicked: %v", recovered)
	}
	if status != want.status || body != want.body || srv.seen.Load() != want.seen || !want.err(err2) {
		t.Errorf("%d %q %v, server saw %d; want %d %q, %d at the server", status, body, err2, srv.seen.Load(), want.status, want.body, want.seen)
	}
	if kind != "reset-panic" {
		if got := rec.injected(); len(got) != 1 || got[0] != f.Kind.String() {
			t.Errorf("events %v; want one injection of %s, marked injected", got, f.Kind)
		}
	}
	if err2 != nil && kind != "latency-cancel" && kind != "stall-body" && !strings.Contains(err2.Error(), "chaos: injected") {
		t.Errorf("the error does not say it was injected: %v", err2)
	}
}

type observerFunc func(middleware.Event)

func (f observerFunc) Observe(e middleware.Event) { f(e) }
