package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// echoServer is a WebSocket server that echoes every message.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func echoOnce(t *testing.T, ctx context.Context, url string, hc *http.Client) {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if rep := engine.ReportOf(resp); rep != nil && len(rep.Attempts) != 1 {
		t.Errorf("the upgrade was sent %d times", len(rep.Attempts))
	}
	for _, msg := range []string{"one", "two"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v", got, err)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// coder/websocket dials through NewClient: with a cancellable context, and
// with a policy timeout, the 101's body stays the connection.
func TestWebSocketThroughNewClient(t *testing.T) {
	srv := echoServer(t)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	timed := fast()
	timed.Timeout = time.Minute
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer tp.Shutdown(context.Background())
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]retrystack.Config{
		"cancellable context":       {Policy: fast(), Transport: transport(t)},
		"Policy.Timeout":            {Policy: timed, Transport: transport(t)},
		"Policy.Timeout, telemetry": {Policy: timed, Transport: transport(t), Telemetry: tel},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := retrystack.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			echoOnce(t, ctx, url, c)
		})
	}
}
