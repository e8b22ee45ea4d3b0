package rttest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Conns counts a test server's open connections: set its ConnState as
// the server's http.Server.ConnState. The zero Conns is ready to use.
type Conns struct {
	mu      sync.Mutex
	open    int
	changed chan struct{} // made on first use: a wake-up for WaitClosed
}

func (c *Conns) wake() chan struct{} {
	if c.changed == nil {
		c.changed = make(chan struct{}, 1)
	}
	return c.changed
}

// ConnState counts st for conn.
func (c *Conns) ConnState(_ net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew:
		c.open++
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
	select {
	case c.wake() <- struct{}{}:
	default:
	}
}

// WaitClosed lets the client's idle connections go (closeIdle) until the
// server has none open; the deadline only bounds a failure. (An HTTP/2
// connection that had a stream cancelled is not idle until the server
// answers the PING net/http sends after the reset, so one call may not be
// enough.)
func (c *Conns) WaitClosed(t *testing.T, closeIdle func()) {
	t.Helper()
	c.mu.Lock()
	changed := c.wake()
	c.mu.Unlock()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		closeIdle()
		c.mu.Lock()
		open := c.open
		c.mu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline:
			t.Errorf("%d connections left open at the server", open)
			return
		}
	}
}

// Server starts a test server of h, over HTTP/1.1 or, with h2c, HTTP/2
// without TLS, and returns it with a transport that speaks the same; conns,
// if not nil, counts its connections. The caller closes both.
func Server(h http.Handler, h2c bool, conns *Conns) (*httptest.Server, *http.Transport) {
	ts := httptest.NewUnstartedServer(h)
	if conns != nil {
		ts.Config.ConnState = conns.ConnState
	}
	tr := &http.Transport{}
	if h2c {
		ts.Config.Protocols = new(http.Protocols)
		ts.Config.Protocols.SetUnencryptedHTTP2(true)
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	ts.Start()
	return ts, tr
}
