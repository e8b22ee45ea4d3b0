package retrystack_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// eventLog is a user's observer: it keeps each event's name and
// attributes as "name key=value ...".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (r *eventLog) Observe(e middleware.Event) {
	s := e.Name
	for _, a := range e.Attrs {
		s += " " + string(a.Key) + "=" + a.Value.String()
	}
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

type refused struct{}

func (refused) Error() string                 { return "refused by a layer of the user's" }
func (refused) StopReason() policy.StopReason { return "quota" }

// TestEventsOfTheRetryLayer: what happens in the retry layer reaches a
// user's observer of the operation as events: each response thrown away,
// each retry with its wait and cause, each pitfall, and a refusal from a
// layer below with its stop reason.
func TestEventsOfTheRetryLayer(t *testing.T) {
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	e, err := engine.New(engine.Config{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventLog{}
	observe := middleware.Layer{Name: "observe", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			op, ok := middleware.OperationOf(req.Context())
			if !ok {
				t.Error("no operation above the retry layer")
			}
			op.Observe(rec)
			return next.RoundTrip(req)
		})
	}}
	s, err := middleware.NewStack(observe, e.Layer())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		base middleware.RoundTripperFunc
		want []string
	}{
		{"503 then 200", answers(503, 200), []string{
			"retrystack.response.discarded http.response.status_code=503",
			"retrystack.retry.backoff retrystack.retry.delay=0 retrystack.retry.source=policy retrystack.layer=http retrystack.retry.reason=status",
		}},
		{"503 until exhausted", answers(503, 503, 503), []string{
			"retrystack.response.discarded http.response.status_code=503",
			"retrystack.retry.backoff retrystack.retry.delay=0 retrystack.retry.source=policy retrystack.layer=http retrystack.retry.reason=status",
			"retrystack.response.discarded http.response.status_code=503",
			"retrystack.retry.backoff retrystack.retry.delay=0 retrystack.retry.source=policy retrystack.layer=http retrystack.retry.reason=status",
			"retrystack.pitfall retrystack.pitfall.name=exhausted-retryable-status",
			"retrystack.give_up retrystack.stop_reason=attempts-exhausted retrystack.layer=http",
		}},
		{"refused below", func(*http.Request) (*http.Response, error) { return nil, refused{} }, []string{
			"retrystack.refusal retrystack.stop_reason=quota",
			"retrystack.give_up retrystack.stop_reason=quota retrystack.layer=http",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.events = nil
			rec.mu.Unlock()
			client := &http.Client{Transport: s.Then(c.base)}
			resp, err := client.Get("http://events.test/")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			} else if !errors.As(err, new(refused)) {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if diff := cmp.Diff(c.want, rec.events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// answers is a base transport that answers each send with the next
// status, and the last one after that.
func answers(statuses ...int) middleware.RoundTripperFunc {
	var mu sync.Mutex
	n := 0
	return func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		code := statuses[min(n, len(statuses)-1)]
		n++
		mu.Unlock()
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1, Request: req}, nil
	}
}
