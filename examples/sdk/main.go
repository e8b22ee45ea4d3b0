// Command sdk embeds the retry stack in a third-party-style SDK that only
// takes an *http.Client — the usual way to give retries to a library you do
// not own — and shows what the SDK cannot tell: the report of each call.
//
//	go run ./examples/sdk
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
)

// WeatherSDK stands for any client library with an option for the HTTP
// client; it knows nothing of retries.
type WeatherSDK struct {
	HTTP    *http.Client
	BaseURL string
}

// Echo is what the weather service says it was asked.
type Echo struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

// Echo calls an endpoint and decodes what the server saw.
func (s *WeatherSDK) Echo(path string) (Echo, error) {
	var e Echo
	resp, err := s.HTTP.Get(s.BaseURL + path)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e, fmt.Errorf("sdk: status %s", resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sdk:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	srv := weatherService()
	defer srv.Close()

	p := policy.Default()
	p.Backoff.Base = time.Millisecond // scaled down for the demo
	var attempts []string
	// An SDK gets a retrying transport under a client of its own: the
	// client follows redirects, each hop retried by the transport.
	rt, err := retrystack.NewTransport(retrystack.Config{
		Policy: &p,
		Hooks: engine.Hooks{OnAttempt: func(ev engine.Event) {
			what := string(ev.Attempt.Decision.Stop)
			if ev.Attempt.Decision.Retry {
				what = "retry: " + ev.Attempt.Decision.Cause
			}
			attempts = append(attempts, fmt.Sprintf("%d (%s)", ev.Attempt.Status, what))
		}},
	})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: rt}
	defer client.CloseIdleConnections()
	sdk := &WeatherSDK{HTTP: client, BaseURL: srv.URL}

	// A page that fails once, then redirects: the SDK sees one clean answer.
	e, err := sdk.Echo("/forecast")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "the SDK got %s %s\n", e.Method, e.Path)
	fmt.Fprintf(w, "the wire saw %d attempts: %v\n", len(attempts), attempts)
	return nil
}

// weatherService stands for the SDK's service: /forecast answers 503 once,
// then redirects to /echo, which says what it was asked as JSON.
func weatherService() *httptest.Server {
	var forecasts atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/forecast" && forecasts.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/forecast":
			http.Redirect(w, r, "/echo", http.StatusFound)
		default:
			json.NewEncoder(w).Encode(Echo{Method: r.Method, Path: r.URL.Path})
		}
	}))
}
