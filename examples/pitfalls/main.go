// Command pitfalls shows seed 003's three retry pitfalls on the wire, the
// hook that exposes each, and its fix, against an in-process fault server.
//
//	go run ./examples/pitfalls
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/cookiejar"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/internal/faultserver"
	"github.com/retrystack/retrystack/internal/presets"
	"github.com/retrystack/retrystack/policy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pitfalls:", err)
		os.Exit(1)
	}
}

// naive is seed 003's classifier: every 503 is retried, whatever the method.
func naive() *policy.Policy {
	p := presets.ReqwestForHost("127.0.0.1")
	p.Classify = policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}.Classify
	return &p
}

// client builds a default-stack client that prints every pitfall it sees.
func client(w io.Writer, cfg retrystack.Config) (*http.Client, error) {
	cfg.Hooks.OnPitfall = func(ev engine.Event) {
		fmt.Fprintf(w, "    hook: pitfall %s", ev.Pitfall)
		if len(ev.Cookies) > 0 {
			fmt.Fprintf(w, " (cookies %s)", strings.Join(ev.Cookies, ", "))
		}
		fmt.Fprintln(w)
	}
	return retrystack.NewClient(cfg)
}

func run(w io.Writer) error {
	srv, err := faultserver.New()
	if err != nil {
		return err
	}
	defer srv.Close()
	// Each client gets a policy of its own: copies of one Policy share its
	// retry budget.
	fast := func() *policy.Policy {
		p := policy.Default()
		p.Backoff.Base = 1 // no real waiting in a demo
		return &p
	}

	fmt.Fprintln(w, "1. A POST is sent three times")
	for _, c := range []struct {
		name string
		p    *policy.Policy
		key  string
	}{{"naive 503 classifier", naive(), "naive"}, {"fix: policy.Default()", fast(), "fixed"}} {
		fmt.Fprintf(w, "  %s\n", c.name)
		cl, err := client(w, retrystack.Config{Policy: c.p})
		if err != nil {
			return err
		}
		resp, err := cl.Post(srv.URL()+"/orders?key="+c.key, "application/json", strings.NewReader(`{"item":1}`))
		if err != nil {
			return err
		}
		resp.Body.Close()
		cl.CloseIdleConnections()
		fmt.Fprintf(w, "    orders written: %d\n", srv.Stats("/orders", c.key).Processed)
	}

	fmt.Fprintln(w, "2. Exhausted retries hand back Ok(503)")
	for _, fail := range []bool{false, true} {
		name := "default"
		if fail {
			name = "fix: FailOnExhausted"
		}
		fmt.Fprintf(w, "  %s\n", name)
		cl, err := client(w, retrystack.Config{Policy: fast(), FailOnExhausted: fail})
		if err != nil {
			return err
		}
		resp, err := cl.Get(srv.URL() + "/s/503")
		var xe *engine.ExhaustedError
		switch {
		case errors.As(err, &xe):
			fmt.Fprintf(w, "    error: status %d after %d attempts\n", xe.Last.StatusCode, len(xe.Report.Attempts))
		case err != nil:
			return err
		default:
			resp.Body.Close()
			fmt.Fprintf(w, "    err == nil, status %d: looks like success to a caller who checks only err\n", resp.StatusCode)
		}
		cl.CloseIdleConnections()
	}

	fmt.Fprintln(w, "3. A retried-away response's Set-Cookie is lost")
	for _, c := range []struct {
		name    string
		capture bool
		key     string
	}{{"reqwest's order, redirect → cookies → retry", false, "lost"}, {"fix: capture discarded cookies", true, "kept"}} {
		fmt.Fprintf(w, "  %s\n", c.name)
		cl, err := client(w, retrystack.Config{Policy: naive(), Cookies: cookiejar.Config{Jar: cookiejar.NewJar(), DropDiscarded: !c.capture}})
		if err != nil {
			return err
		}
		resp, err := cl.Post(srv.URL()+"/login?key="+c.key, "text/plain", strings.NewReader("user=a"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		resp, err = cl.Get(srv.URL() + "/me?key=" + c.key)
		if err != nil {
			return err
		}
		me, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cl.CloseIdleConnections()
		fmt.Fprintf(w, "    /me received Cookie: %s\n", me)
	}
	return nil
}
