package engine

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/rttest"
	"github.com/retrystack/retrystack/policy"
)

// A server closes an idle keep-alive connection (nginx's
// keepalive_timeout, a load balancer's idle timeout) just as net/http
// takes it from the pool: net/http's "server closed idle connection",
// nothing written. net/http resends it itself only for a replayable
// request; a PUT, a DELETE or an unkeyed POST came back as an error the
// engine called "other" and did not retry. It is the connection's EOF,
// before anything was sent: retried, any method, and the server sees the
// request once.
func TestServerClosedIdleConnectionIsResent(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			var got atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if r.URL.Path == "/op" {
					got.Add(1)
				}
			}))
			defer srv.Close()

			var first *rttest.HeldEnd
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				h := rttest.NewHeldEnd(c)
				if first == nil {
					first = h
				}
				return h, nil
			}}
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL+"/warm", nil).WithContext(context.Background()))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close() // the connection goes back to the pool

			first.Hold()
			srv.CloseClientConnections() // the server's FIN, held on the client's side
			defer first.Release()        // if the test fails before releasing it

			p := policy.Default()
			e, err := New(Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
			released := false
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused && !released {
					// The pool handed out the connection: now its FIN
					// arrives, and the request waits until net/http has
					// closed the connection for it.
					released = true
					first.Release()
					<-first.Closed()
				}
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, srv.URL+"/op", io.NopCloser(strings.NewReader("payload")))
			resp, err = e.Layer().Wrap(tr).RoundTrip(req)
			if !released {
				t.Fatal("the pooled connection was not reused: the test did not set up the race")
			}
			if err != nil {
				t.Fatalf("%s on a connection the server closed idle: %v; want it resent", method, err)
			}
			resp.Body.Close()
			rep := ReportOf(resp)
			if rep.Stop != policy.StopSuccess || len(rep.Attempts) != 2 || rep.Attempts[0].Processed != policy.NotSent || got.Load() != 1 {
				t.Fatalf("report %v (first attempt %v), server saw %d; want 2 attempts, the first not-sent, success, and one request at the server", rep, rep.Attempts[0].Processed, got.Load())
			}
		})
	}
}
