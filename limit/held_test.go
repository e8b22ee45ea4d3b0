package limit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// A request that waited for room has the wait in its attempt's record
// (AttemptRecord.Held) and its report's String; one that found room has
// none; one refused after waiting has the wait too.
func TestWaitInTheReport(t *testing.T) {
	release, blocked := make(chan struct{}), make(chan struct{})
	arrived := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		switch r.URL.Path {
		case "/slow":
			<-release
		case "/blocked":
			<-blocked
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	l, err := New(Config{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := middleware.NewStack(e.Layer(), l.Layer())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: st.Then(tr)}
	get := func(ctx context.Context, path string) (*engine.Report, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			return engine.ReportFrom(err), err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return engine.ReportOf(resp), nil
	}

	first := make(chan *engine.Report)
	go func() { rep, _ := get(context.Background(), "/slow"); first <- rep }()
	<-arrived // the first holds the one place
	second := make(chan *engine.Report)
	go func() { rep, _ := get(context.Background(), "/"); second <- rep }()
	k, _ := l.keys.Load(strings.TrimPrefix(srv.URL, "http://"))
	until(t, func() bool { f, _ := k.waiting(); return f == 1 }) // the second waits for room
	close(release)
	if rep := <-first; rep.Attempts[0].Held != 0 {
		t.Errorf("the first found room, yet held %v", rep.Attempts[0].Held)
	}
	rep := <-second
	<-arrived // the second's
	if rep.Attempts[0].Held <= 0 || !strings.Contains(rep.String(), "below)") {
		t.Errorf("the second waited for room; its report %v says held %v", rep, rep.Attempts[0].Held)
	}

	// Refused after waiting: the wait ends as a deadline passes; the
	// record has the wait too.
	defer close(blocked)
	go func() { get(context.Background(), "/blocked") }()
	<-arrived
	ctx := &endable{Context: context.Background(), done: make(chan struct{})}
	refused := make(chan *engine.Report)
	go func() { rep, _ := get(ctx, "/"); refused <- rep }()
	until(t, func() bool { f, _ := k.waiting(); return f == 1 })
	close(ctx.done)
	if rep := <-refused; rep.Stop != policy.StopConcurrencyLimited || len(rep.Attempts) != 1 || rep.Attempts[0].Held <= 0 {
		t.Errorf("refused after a wait: %v (%v), held %v; want concurrency-limited with the wait", rep, rep.Attempts[0].Err, rep.Attempts[0].Held)
	}
}

// endable is a context whose deadline passes when done is closed: a wait
// ended by a deadline, without a clock.
type endable struct {
	context.Context
	done chan struct{}
}

func (c *endable) Done() <-chan struct{} { return c.done }

func (c *endable) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
