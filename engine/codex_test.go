package engine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/policy"
)

// A 401 runs RefreshAuth once; Prepare rebuilds the request with the new
// token; the resend goes at once, outside the backoff.
func TestRefreshAuthAndPrepare(t *testing.T) {
	var token atomic.Value
	token.Store("old")
	var refreshes atomic.Int32
	f := setup(t, presets.Codex(), func(c *Config) {
		c.Prepare = func(r *http.Request, n int) error {
			r.Header.Set("Authorization", "Bearer "+token.Load().(string))
			r.Header.Set("X-Attempt", strconv.Itoa(n))
			return nil
		}
		c.RefreshAuth = func(ctx context.Context, resp *http.Response) error {
			refreshes.Add(1)
			token.Store("new")
			return nil
		}
	})
	resp, rep, err := f.send(context.Background(), "GET", "/auth", "", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "new" || refreshes.Load() != 1 {
		t.Errorf("status %d, body %q, %d refreshes; want 200, new, 1", resp.StatusCode, b, refreshes.Load())
	}
	if len(rep.Attempts) != 2 || rep.Attempts[0].Decision.Cause != causeAuth || len(f.clock.slept) != 1 || f.clock.slept[0] != 0 {
		t.Errorf("attempts %+v, slept %v", rep.Attempts, f.clock.slept)
	}

	// A refresh that does not help is not tried twice.
	token.Store("wrong")
	f2 := setup(t, presets.Codex(), func(c *Config) {
		c.Prepare = func(r *http.Request, _ int) error { r.Header.Set("Authorization", "Bearer wrong"); return nil }
		c.RefreshAuth = func(context.Context, *http.Response) error { return nil }
	})
	resp, rep, err = f2.send(context.Background(), "GET", "/auth", "", false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(rep.Attempts) != 2 {
		t.Errorf("status %d after %d attempts, want 401 after 2", resp.StatusCode, len(rep.Attempts))
	}
}

func TestPrepareError(t *testing.T) {
	errNoToken := errors.New("no token")
	f := setup(t, policy.Default(), func(c *Config) {
		c.Prepare = func(*http.Request, int) error { return errNoToken }
	})
	_, rep, err := f.send(context.Background(), "GET", "/s/200", "", false)
	if !errors.Is(err, errNoToken) || f.requests() != 0 || rep.Attempts[0].Processed != policy.NotSent {
		t.Errorf("error %v, %d requests, %+v", err, f.requests(), rep.Attempts)
	}
}

// Two nested levels keep their own counts and labels; the outer one falls
// back once.
func TestNestedAndFallback(t *testing.T) {
	stream, err := New(Config{Policy: presets.CodexStream(), Layer: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	stream.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	broken := errors.New("stream disconnected")
	var primary, fallback int
	_, rep, err := Do(context.Background(), stream, Op[int]{
		Attempt:  func(context.Context, int) (int, error) { primary++; return 0, broken },
		Fallback: &Op[int]{Attempt: func(context.Context, int) (int, error) { fallback++; return 0, broken }},
	})
	if !errors.Is(err, broken) || primary != 6 || fallback != 6 {
		t.Errorf("error %v, %d + %d attempts; want 6 + 6", err, primary, fallback)
	}
	if rep.Layer != "stream" || rep.Fallbacks != 1 || rep.Stop != policy.StopAttemptsExhausted {
		t.Errorf("report: layer %q, %d fallbacks, stop %s", rep.Layer, rep.Fallbacks, rep.Stop)
	}
}

// The resend after a refresh is no pitfall for a POST (the 401 refused
// it), and with no attempt left nothing is refreshed: the 401 is the
// answer.
func TestRefreshAuthReporting(t *testing.T) {
	var refreshes atomic.Int32
	refresh := func(c *Config) {
		c.Prepare = func(r *http.Request, n int) error {
			if refreshes.Load() > 0 {
				r.Header.Set("Authorization", "Bearer new")
			}
			return nil
		}
		c.RefreshAuth = func(context.Context, *http.Response) error { refreshes.Add(1); return nil }
	}
	f := setup(t, policy.Default(), refresh)
	resp, rep, err := f.send(context.Background(), "POST", "/auth", "x", false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(rep.Pitfalls) != 0 {
		t.Errorf("POST after a refresh: status %d, pitfalls %v; want 200 and none", resp.StatusCode, rep.Pitfalls)
	}

	refreshes.Store(0)
	one := policy.Default()
	one.MaxAttempts = 1
	f = setup(t, one, refresh)
	resp, rep, err = f.send(context.Background(), "GET", "/auth", "", false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || refreshes.Load() != 0 || rep.Stop != policy.StopNonRetryable {
		t.Errorf("one attempt: status %d, %d refreshes, stop %s; want 401, 0, non-retryable", resp.StatusCode, refreshes.Load(), rep.Stop)
	}
}

// A classifier's zero Decision stops the operation: nothing is resent
// outside every limit.
func TestZeroDecisionStops(t *testing.T) {
	p := policy.Default()
	p.Classify = func(policy.Attempt) policy.Decision { return policy.Decision{} }
	for path, want := range map[string]policy.StopReason{"/s/200": policy.StopSuccess, "/s/503": policy.StopNonRetryable} {
		f := setup(t, p)
		resp, rep, err := f.send(context.Background(), "GET", path, "", false)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if f.requests() != 1 || rep.Stop != want {
			t.Errorf("%s: %d requests, stop %s; want 1, %s", path, f.requests(), rep.Stop, want)
		}
	}
}
