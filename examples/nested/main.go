// Command nested runs two nested retry budgets, as OpenAI's Codex client
// has them: a stream operation under its own policy with engine.Do, whose
// every attempt sends
// an HTTP request through the retry layer with a policy of its own. Each
// level keeps its own counters and labels its reports "stream" or "http".
//
//	go run ./examples/nested
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/policy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nested:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	srv, err := faultserver.New()
	if err != nil {
		return err
	}
	defer srv.Close()

	// The inner level: request retries (5xx and transport errors).
	inner := policy.Default()
	inner.Backoff.Base = time.Millisecond // scaled down for the demo
	// Default's budget holds 2 retries at once and earns one back per 5
	// successes (or per retry that succeeds): less than a server that
	// fails two requests in three asks. A burst of 6 covers the demo.
	if inner.Budget, err = policy.NewEarnedBudget(0.2, 6); err != nil {
		return err
	}
	client, err := retrystack.NewClient(retrystack.Config{Policy: &inner})
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()

	// The outer level: stream retries, each one a whole new request.
	outer := policy.Policy{
		Name:        "stream",
		MaxAttempts: 3,
		Classify: func(a policy.Attempt) policy.Decision {
			if a.Err == nil {
				return policy.Stop(policy.StopSuccess)
			}
			return policy.Retry("stream broke") // every broken stream is retried
		},
		Backoff: policy.Backoff{Base: time.Millisecond},
	}
	stream, err := engine.New(engine.Config{Policy: outer, Layer: "stream"})
	if err != nil {
		return err
	}

	errBroken := errors.New("stream disconnected")
	_, rep, err := engine.Do(context.Background(), stream, engine.Op[string]{
		Attempt: func(ctx context.Context, n int) (string, error) {
			// Each stream attempt meets 503, 503, then 200 from the server.
			url := fmt.Sprintf("%s/fail/2/503?key=stream-%d", srv.URL(), n)
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			resp.Body.Close()
			reqRep := engine.ReportOf(resp)
			fmt.Fprintf(w, "  %s attempt %d: %s level made %d attempts, %s\n", "stream", n, reqRep.Layer, len(reqRep.Attempts), reqRep.Stop)
			if n < 3 {
				return "", errBroken // the stream breaks after the request succeeded
			}
			return "complete", nil
		},
	})
	fmt.Fprintf(w, "%s level: %d attempts, %s, err=%v\n", rep.Layer, len(rep.Attempts), rep.Stop, err)
	return nil
}
