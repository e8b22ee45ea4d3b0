package rttest

import (
	"net"
	"sync"
	"sync/atomic"
)

// HeldEnd is a client connection whose end (the server's FIN, or any
// read error) is held, once Hold was called, until Release: a test picks
// the moment a pooled connection is found dead (a server's idle timeout
// racing the request that takes the connection from the pool).
type HeldEnd struct {
	net.Conn
	hold                            atomic.Bool
	fin, release, closed            chan struct{}
	finOnce, releaseOnce, closeOnce sync.Once
}

// NewHeldEnd wraps c; its end is not held until Hold.
func NewHeldEnd(c net.Conn) *HeldEnd {
	return &HeldEnd{Conn: c, fin: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
}

// Hold holds the connection's end from now on.
func (c *HeldEnd) Hold() { c.hold.Store(true) }

// Fin is closed when a held end has arrived.
func (c *HeldEnd) Fin() <-chan struct{} { return c.fin }

// Release lets a held end through; calling it again does nothing.
func (c *HeldEnd) Release() { c.releaseOnce.Do(func() { close(c.release) }) }

// Closed is closed by the first Close: the transport gave the connection
// up.
func (c *HeldEnd) Closed() <-chan struct{} { return c.closed }

func (c *HeldEnd) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.hold.Load() {
		c.finOnce.Do(func() { close(c.fin) })
		<-c.release
	}
	return n, err
}

// Close closes the connection and Closed.
func (c *HeldEnd) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
