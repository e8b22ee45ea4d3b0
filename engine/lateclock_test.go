package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// lateTimer is a context whose deadline has passed but whose timer has
// not run yet, as under load.
type lateTimer struct {
	context.Context
	deadline time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.deadline, true }

// An answer that arrives once the caller's deadline has passed is the
// deadline's error even before the context's timer runs: the verdict does
// not depend on which goroutine runs first (chain/deadline-propagated
// failed under load: a service's error at its own, a moment later,
// deadline arrived before the caller's timer ran).
func TestAnswerAfterTheDeadlineBeforeItsTimer(t *testing.T) {
	e, _ := engine.New(engine.Config{Policy: policy.Default()})
	rt := e.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 502, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	ctx := lateTimer{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Report.Stop != policy.StopDeadline || !ee.Timeout() {
		t.Errorf("%v: want an *engine.Error with stop deadline that is a timeout", err)
	}
}

// A POST cut off by its attempt timeout after it got a connection is not
// resent, though the transport had not yet reported writing it (under
// load the report comes after RoundTrip returns): the server may have it.
func TestPostCutOffBeforeTheWriteReportIsNotResent(t *testing.T) {
	p := policy.Default()
	p.Backoff, p.AttemptTimeout = policy.Backoff{}, 20*time.Millisecond
	e, _ := engine.New(engine.Config{Policy: p})
	sends := 0
	rt := e.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sends++
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{}) // the headers leave now; WroteHeaders comes too late
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}))
	req, _ := http.NewRequest("POST", "http://svc.test/orders", strings.NewReader("x"))
	_, err := rt.RoundTrip(req)
	rep := engine.ReportFrom(err)
	if sends != 1 || rep == nil || rep.Stop != policy.StopAttemptTimeout || rep.Attempts[0].Processed != policy.SentNoResponse {
		t.Errorf("%d sends, report %+v; want 1 send, stop attempt-timeout (not retried), the attempt sent-no-response", sends, rep)
	}
}
