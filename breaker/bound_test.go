package breaker

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func answer(code int) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (b *Breaker) size() int { return b.circuits.Len() }

// 100 000 keys (per-tenant keys, many hosts): the map stays within its
// bound, whether the circuits are idle (forgotten as the same as new ones)
// or remember failures (forgotten at random once full).
func TestCircuitsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		max  int
	}{
		{"successes", 200, 0},
		{"a failure each", 503, 0},
		{"a failure each, small bound", 503, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Config{MaxCircuits: tc.max, Key: func(r *http.Request) string { return r.Header.Get("Tenant") }})
			if err != nil {
				t.Fatal(err)
			}
			rt := b.Layer().Wrap(answer(tc.code))
			req, _ := http.NewRequest("GET", "http://svc.test/", nil)
			peak := 0
			for i := range 100_000 {
				req.Header.Set("Tenant", strconv.Itoa(i))
				if _, err := rt.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
				peak = max(peak, b.size())
			}
			if peak > b.cfg.MaxCircuits {
				t.Errorf("%d circuits at the peak, bound %d", peak, b.cfg.MaxCircuits)
			}
			if tc.code == 200 && peak > 200 {
				t.Errorf("%d idle circuits kept at the peak: idle ones are forgotten as keys come and go", peak)
			}
		})
	}
}

// A circuit with a request in flight is never forgotten: the request's
// result must count in the circuit the next request sees.
func TestInFlightCircuitsAreKept(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	b, _ := New(Config{MaxCircuits: 2, Consecutive: 1, OpenFor: time.Hour, Key: func(r *http.Request) string { return r.Header.Get("Tenant") }})
	rt := b.Layer().Wrap(rtFunc(func(req *http.Request) (*http.Response, error) {
		entered <- struct{}{}
		<-release
		return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}))
	done := make(chan struct{})
	for i := range 3 {
		go func() {
			req, _ := http.NewRequest("GET", "http://svc.test/", nil)
			req.Header.Set("Tenant", strconv.Itoa(i))
			rt.RoundTrip(req)
			done <- struct{}{}
		}()
		<-entered
	}
	if n := b.size(); n != 3 {
		t.Errorf("%d circuits with 3 requests in flight on 3 keys", n)
	}
	close(release)
	for range 3 {
		<-done
	}
	open := 0
	for i := range 3 {
		if b.State(strconv.Itoa(i)) == Open {
			open++
		}
	}
	if open != 3 {
		t.Errorf("%d of 3 circuits open: a result was counted in a forgotten circuit", open)
	}
}
