package redis_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/stores/redis"
)

// fleetClient is one process of a fleet named name: a transport whose
// policy shares the Fleet's budget and holds.
func fleetClient(t *testing.T, c goredis.UniversalClient, name string, attempts int) (http.RoundTripper, *redis.Fleet) {
	t.Helper()
	fleet, err := redis.NewFleet(c, redis.FleetConfig{Name: name, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	p := policy.Default()
	p.Budget = fleet
	p.RetryAfter.Shared = fleet
	p.MaxAttempts = attempts
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p})
	if err != nil {
		t.Fatal(err)
	}
	return rt, fleet
}

// Through NewTransport, over real connections: one process's 429 with
// Retry-After holds another process's request to that host, which waits
// and says so in its report.
func TestFleetTransportsShareAHold(t *testing.T) {
	c := testClient(t)
	name := "transport-test-" + time.Now().Format("150405.000000")
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	a, _ := fleetClient(t, c, name, 1) // hands the 429 back
	b, fleetB := fleetClient(t, c, name, 3)

	get := func(rt http.RoundTripper, path string, want int) *engine.Report {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return engine.ReportOf(resp)
	}
	get(a, "/a", http.StatusTooManyRequests)

	// The hold reaches b at its next exchange after a's (a sends it at
	// once, b exchanges every 10 ms, the hold lasts 2 s): wait for that.
	u, _ := url.Parse(srv.URL)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/b", nil)
	for fleetB.HeldUntil(req, u.Host).IsZero() {
		time.Sleep(time.Millisecond) // polling for the exchange, not a verdict
	}
	rep := get(b, "/b", http.StatusOK)
	if len(rep.Paced) != 1 || rep.Paced[0].Waited <= 0 || rep.Paced[0].Host != u.Host {
		t.Errorf("the other process's report: %v; want one pacing wait for %s", rep, u.Host)
	}
	if !strings.Contains(rep.String(), "paced") {
		t.Errorf("String %q does not show the wait", rep.String())
	}
	if got := n.Load(); got != 2 {
		t.Errorf("the server saw %d requests, want 2 (the 429, then b's after the hold)", got)
	}
}

// The shared budget costs the success path nothing: no allocation more
// than the local default's, no Redis call (the exchange is in the
// background).
func TestFleetSuccessPathAllocations(t *testing.T) {
	c := testClient(t)
	fleet, err := redis.NewFleet(c, redis.FleetConfig{Name: "allocs-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	ok := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	allocs := func(p policy.Policy) float64 {
		rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: ok})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://api.example.com/", nil)
		return testing.AllocsPerRun(1000, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	local := policy.Default()
	shared := policy.Default()
	shared.Budget, shared.RetryAfter.Shared = fleet, fleet
	l, s := allocs(local), allocs(shared)
	t.Logf("allocations a success: %.0f with the local default, %.0f with the shared budget", l, s)
	if s > l {
		t.Errorf("a success with the shared budget: %.0f allocations, with the local default %.0f", s, l)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
