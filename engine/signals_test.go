package engine_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrystack/retrystack/crosslayer"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// Signals that net/http could not send, or two under one name, are a
// configuration error when the engine is made, not a failure of every
// request that has a deadline.
func TestBadSignals(t *testing.T) {
	for _, tc := range []struct {
		signals crosslayer.Signals
		field   string
	}{
		{crosslayer.Signals{Timeout: "Deadline Ms"}, "engine.Config.Signals.Timeout"},
		{crosslayer.Signals{Attempt: "X-Attempt:"}, "engine.Config.Signals.Attempt"},
		{crosslayer.Signals{ShouldRetry: "é"}, "engine.Config.Signals.ShouldRetry"},
		{crosslayer.Signals{Attempt: "x-retry", Timeout: "X-Retry"}, "engine.Config.Signals.Timeout"},
		{crosslayer.Signals{ShouldRetry: "Retrystack-Attempt"}, "engine.Config.Signals.ShouldRetry"},
	} {
		_, err := engine.New(engine.Config{Policy: policy.Default(), Signals: tc.signals})
		var ce *policy.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a ConfigError for %s", tc.signals, err, tc.field)
		}
	}
	// Off: the names are not used.
	if _, err := engine.New(engine.Config{Policy: policy.Default(), Signals: crosslayer.Signals{Off: true, Timeout: "bad name"}}); err != nil {
		t.Errorf("Off with a bad name: %v", err)
	}
}

// The time left is told as the request leaves, after Prepare (which may
// fetch a token for a while), as gRPC sets grpc-timeout at send time.
func TestTimeLeftAfterPrepare(t *testing.T) {
	p := policy.Default()
	p.Timeout = time.Minute
	var sent string
	e, _ := engine.New(engine.Config{Policy: p, Signals: crosslayer.Signals{To: &policy.Scope{}}, Prepare: func(*http.Request, int) error {
		<-time.After(100 * time.Millisecond) // a slow token fetch: timers never fire early
		return nil
	}})
	rt := e.Layer().Wrap(middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sent = req.Header.Get("Retrystack-Timeout-Ms")
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	req, _ := http.NewRequest("GET", "http://svc.test/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ms, err := strconv.Atoi(sent); err != nil || ms > 59_900 {
		t.Errorf("time left sent %q, want at most 59900 ms (Prepare took 100 ms of the minute)", sent)
	}
}
