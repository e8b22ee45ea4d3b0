package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/breaker"
	"github.com/retrystack/retrystack/hedge"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"github.com/retrystack/retrystack/middleware"
)

// HedgeDelay is the delay before a hedge in the slow-tail comparison.
const HedgeDelay = 50 * time.Millisecond

// Hedgers are the clients of the slow-tail comparison: none, retrystack's
// hedging layer inside its retry layer, failsafe-go's hedge policy.
var Hedgers = []Lib{
	{Name: "net/http", New: func(tr http.RoundTripper, _ Mode) (*http.Client, error) { return &http.Client{Transport: tr}, nil }},
	{Name: "retrystack+hedge", New: func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		s, err := retrystack.NewStack(retrystack.Config{})
		if err != nil {
			return nil, err
		}
		if s, err = s.InsertAfter("retry", hedge.Layer(hedge.Config{Delay: HedgeDelay})); err != nil {
			return nil, err
		}
		return retrystack.Client(s, tr), nil
	}},
	{Name: "failsafe-go", New: func(tr http.RoundTripper, _ Mode) (*http.Client, error) {
		return &http.Client{Transport: failsafehttp.NewRoundTripper(tr, hedgepolicy.NewWithDelay[*http.Response](HedgeDelay))}, nil
	}},
}

// TailResult is what the slow-tail run measured.
type TailResult struct {
	P50, P99       time.Duration
	ExtraLoadPct   float64 // requests beyond one per GET, in per cent
	OpenConnsAfter int
}

// SlowTail sends n sequential GETs through lib to a server where every
// 10th request takes 300 ms and the others 5 ms.
func SlowTail(lib Lib, n int) (TailResult, error) {
	srv, err := faultserver.New()
	if err != nil {
		return TailResult{}, err
	}
	defer srv.Close()
	tr := &http.Transport{}
	c, err := lib.New(tr, Mode{})
	if err != nil {
		return TailResult{}, err
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		resp, err := c.Get(srv.URL() + "/slow/headers?every=10&delay=300ms&base=5ms&key=tail")
		if err != nil {
			return TailResult{}, fmt.Errorf("GET %d: %w", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
	}
	c.CloseIdleConnections()
	slices.Sort(lat)
	res := TailResult{P50: lat[n/2], P99: lat[n*99/100-1], ExtraLoadPct: float64(len(srv.Log())-n) * 100 / float64(n)}
	time.Sleep(50 * time.Millisecond) // let the server see the closes
	res.OpenConnsAfter = srv.OpenConns()
	return res, nil
}

// Breakers are the circuit breakers of the in-memory comparison, each
// opening after 5 consecutive failures.
var Breakers = []struct {
	Name string
	New  func(base http.RoundTripper) http.RoundTripper
}{
	{"retrystack", func(base http.RoundTripper) http.RoundTripper {
		s, _ := middleware.NewStack(breaker.Layer(breaker.Config{Consecutive: 5, OpenFor: time.Hour}))
		return s.Then(base)
	}},
	{"failsafe-go", func(base http.RoundTripper) http.RoundTripper {
		cb := circuitbreaker.NewBuilder[*http.Response]().HandleIf(func(r *http.Response, err error) bool {
			return err != nil || r.StatusCode >= 500
		}).WithFailureThreshold(5).WithDelay(time.Hour).Build()
		return failsafehttp.NewRoundTripper(base, cb)
	}},
}

// BreakerClosed measures a request through a closed breaker, in memory.
func BreakerClosed(b *testing.B, newRT func(http.RoundTripper) http.RoundTripper) {
	c := &http.Client{Transport: newRT(memory{})}
	run(b, false, func() error {
		req, _ := http.NewRequest("GET", "http://memory.test/", nil)
		return do(c, req)
	})
}

// BreakerOpen measures a request an open breaker refuses, in memory.
func BreakerOpen(b *testing.B, newRT func(http.RoundTripper) http.RoundTripper) {
	rt := newRT(middleware.RoundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, errFail }))
	c := &http.Client{Transport: rt}
	for range 5 {
		req, _ := http.NewRequest("GET", "http://memory.test/", nil)
		c.Do(req)
	}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("GET", "http://memory.test/", nil)
		if _, err := c.Do(req); err == nil {
			b.Fatal("the open breaker let a request through")
		}
	}
}

var errFail = errors.New("down")
