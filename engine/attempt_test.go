package engine

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"

	"github.com/google/go-cmp/cmp"
)

// withSignals is http.Header.Clone followed by setting (or deleting) the
// two cross-layer headers, without the map growing or a slice per value;
// the copy shares nothing with the original.
func TestWithSignals(t *testing.T) {
	const a, tm = "Retrystack-Attempt", "Retrystack-Timeout-Ms"
	for _, h := range []http.Header{
		nil,
		{},
		{"Accept": {"a", "b"}, "User-Agent": nil},
		{a: {"9; max=9"}, tm: {"1"}, "X": {"x"}},
		{a: nil},
	} {
		for _, c := range []struct {
			attempt, timeout string
			set              bool
		}{{"2; max=3", "150", true}, {"", "150", true}, {"2; max=3", "", true}, {"", "", true}, {"2; max=3", "150", false}} {
			want := h.Clone()
			if want == nil {
				want = http.Header{}
			}
			if c.set {
				for name, v := range map[string]string{a: c.attempt, tm: c.timeout} {
					if v == "" {
						delete(want, name)
					} else {
						want[name] = []string{v}
					}
				}
			}
			got := withSignals(h, a, c.attempt, tm, c.timeout, c.set)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%v %+v (-want +got):\n%s", h, c, diff)
			}
			for k, v := range got {
				if len(v) > 0 {
					v[0] = "changed"
				}
				if hv := h[k]; len(hv) > 0 && hv[0] == "changed" {
					t.Fatalf("the copy shares %s with the original", k)
				}
			}
		}
	}
}

// FailOnExhausted with a classifier that retries a status below 400 (a
// 200 whose body says "not yet"): the error carries that response, closed,
// and its message does not fail.
func TestFailOnExhaustedBelow400(t *testing.T) {
	p := policy.Default()
	p.Backoff, p.Budget = policy.Backoff{}, nil
	p.Classify = func(a policy.Attempt) policy.Decision { return policy.Retry("status") }
	e, err := New(Config{Policy: p, FailOnExhausted: true})
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Int32
	base := middleware.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Request: req,
			Body: closeCounter{io.NopCloser(strings.NewReader("not yet")), &closed}}, nil
	})
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	_, err = e.Layer().Wrap(base).RoundTrip(req)
	xe, ok := errors.AsType[*ExhaustedError](err)
	if !ok || xe.Last == nil || xe.Last.StatusCode != 200 || !strings.Contains(xe.Error(), "200") {
		t.Fatalf("%v, want an *ExhaustedError carrying the 200", err)
	}
	if closed.Load() != 3 {
		t.Errorf("%d bodies closed, want 3", closed.Load())
	}
}

type closeCounter struct {
	io.ReadCloser
	n *atomic.Int32
}

func (c closeCounter) Close() error { c.n.Add(1); return c.ReadCloser.Close() }
