package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/testkit/presets"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// scaled is Codex's 200 ms backoff scaled to 10 ms, so the nested rows run
// in well under a second.
const scaled = 10 * time.Millisecond

var (
	httpScaled = func(p *policy.Policy) { p.Backoff.Base = scaled }
	// errStreamBroken is the stream failing after its HTTP request succeeded.
	errStreamBroken = errors.New("stream disconnected before completion")
)

// streamEngine is Codex's outer, stream-level retry budget, scaled.
func streamEngine(t *trial) (*engine.Engine, error) {
	p := presets.CodexStream()
	p.Backoff.Base = scaled
	return engine.New(engine.Config{Policy: p, Layer: "stream"})
}

// streamObserver records a stream operation's events on the trial's span,
// when the trial is traced (-otlp).
func streamObserver(t *trial) middleware.Observer {
	if t.tel == nil {
		return nil
	}
	return t.tel.Observer(t.ctx)
}

// streamAttempt opens the stream with one HTTP request (the request-level
// retries happen inside it, through the trial's stack), then breaks.
func streamAttempt(t *trial, path string, httpAttempts *int) func(context.Context, int) (int, error) {
	return func(ctx context.Context, n int) (int, error) {
		// A sub-key per stream attempt: each one meets 503, 503, 200 afresh.
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		sub := url.QueryEscape(fmt.Sprintf("%s/stream-%d", t.key, n))
		_, _, rep, err := t.request(ctx, "GET", path+sep+"key="+sub, nil)
		if rep != nil {
			*httpAttempts += len(rep.Attempts)
		}
		if err != nil {
			return 0, err
		}
		return 0, errStreamBroken
	}
}

// stopOf names how a stream operation ended, for the row.
func stopOf(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

var seed002 = []scenario{
	{
		id:     "seed002/request-retries",
		setup:  "preset codex (4 request retries, base 200 ms, retry 5xx and transport, not 429); GET /s/503",
		preset: "codex", run: get("/s/503"),
		want: expect{"5", "503", "attempts-exhausted", "-"},
	},
	{
		id:     "seed002/no-429",
		setup:  "preset codex; GET answers 429",
		preset: "codex", run: get("/s/429"),
		want: expect{"1", "429", "non-retryable", "-"},
	},
	{
		id: "seed002/nested-stream-budget",
		setup: "preset codex; a stream operation (5 stream retries) whose HTTP request gets 503, 503, 200 and whose stream then breaks every time " +
			"(HTTP and stream base delays scaled to 10 ms so the row runs in under a second)",
		preset: "codex", tune: httpScaled,
		run: func(t *trial) {
			e, err := streamEngine(t)
			if err != nil {
				panic(err) // a preset that does not validate is a bug in the lab
			}
			httpAttempts := 0
			t.measure(func() (string, *engine.Report) {
				_, rep, err := engine.Do(t.ctx, e, engine.Op[int]{Attempt: streamAttempt(t, "/fail/2/503", &httpAttempts), Observer: streamObserver(t)})
				t.extra["stream_attempts"] = strconv.Itoa(len(rep.Attempts))
				return stopOf(err), rep
			})
			t.extra["http_attempts"] = strconv.Itoa(httpAttempts)
		},
		want: expect{"18", "error", "attempts-exhausted", "stream_attempts=6;http_attempts=18"},
	},
	{
		id:     "seed002/fallback-transport",
		setup:  "preset codex; stream budget exhausted, one fallback transport switch resets it, second exhaustion ends (delays scaled to 10 ms)",
		preset: "codex", tune: httpScaled,
		run: func(t *trial) {
			e, err := streamEngine(t)
			if err != nil {
				panic(err)
			}
			var n int
			t.measure(func() (string, *engine.Report) {
				_, rep, err := engine.Do(t.ctx, e, engine.Op[int]{
					Attempt:  streamAttempt(t, "/echo?transport=websocket", &n),
					Fallback: &engine.Op[int]{Attempt: streamAttempt(t, "/echo?transport=https", &n)},
					Observer: streamObserver(t),
				})
				t.extra["fallbacks"] = strconv.Itoa(rep.Fallbacks)
				return stopOf(err), rep
			})
		},
		want: expect{"-", "error", "attempts-exhausted", "fallbacks=1"},
	},
	{
		id:     "seed002/auth-refresh-401",
		setup:  "preset codex; 401, refresh hook rebuilds the request with a new token, then 200",
		preset: "codex",
		engine: func(t *trial, c *engine.Config) {
			var token atomic.Value
			token.Store("old")
			c.Prepare = func(r *http.Request, _ int) error {
				r.Header.Set("Authorization", "Bearer "+token.Load().(string))
				return nil
			}
			c.RefreshAuth = func(context.Context, *http.Response) error {
				token.Store("new")
				return nil
			}
		},
		run: func(t *trial) {
			_, body, _ := t.send("GET", "/auth", "")
			t.extra["second_token"] = body
		},
		want: expect{"2", "200", "success", "second_token=new"},
	},
}
