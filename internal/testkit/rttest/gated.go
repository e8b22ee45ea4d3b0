package rttest

import (
	"io"
	"sync"
)

// GatedBody is a streaming request body (no GetBody, no Seek) of data: it
// gives its first open bytes at once and the rest only once Release is
// called; AtGate is closed when a read first waits for the release. chunk,
// when above 0, caps each read, as a producer that has only so much at a
// time. A test's early answers to uploads use it to
// hold a transport's writer in a read.
type GatedBody struct {
	data     []byte
	pos      int
	open     int
	chunk    int
	gate     chan struct{}
	atGate   chan struct{}
	waitOnce sync.Once
	openOnce sync.Once
}

// NewGatedBody returns a GatedBody of data whose first open bytes flow at
// once.
func NewGatedBody(data []byte, open, chunk int) *GatedBody {
	return &GatedBody{data: data, open: open, chunk: chunk, gate: make(chan struct{}), atGate: make(chan struct{})}
}

// AtGate is closed once a read waits for the release.
func (b *GatedBody) AtGate() <-chan struct{} { return b.atGate }

// Release lets the rest of the body flow; calling it again does nothing.
func (b *GatedBody) Release() { b.openOnce.Do(func() { close(b.gate) }) }

func (b *GatedBody) Read(p []byte) (int, error) {
	if b.pos >= len(b.data) {
		return 0, io.EOF
	}
	end := len(b.data)
	if b.pos < b.open {
		end = b.open
	} else {
		b.waitOnce.Do(func() { close(b.atGate) })
		<-b.gate
	}
	if b.chunk > 0 && len(p) > b.chunk {
		p = p[:b.chunk]
	}
	n := copy(p, b.data[b.pos:end])
	b.pos += n
	return n, nil
}

// Close does nothing: the data stays for a test to compare.
func (b *GatedBody) Close() error { return nil }

// CloseHook is a body that runs Before when it is first closed, then
// closes the body it wraps: a test's moment "the layer above released
// this response".
type CloseHook struct {
	io.ReadCloser
	Before func()
	once   sync.Once
}

// Close runs Before once, then closes the wrapped body.
func (c *CloseHook) Close() error {
	c.once.Do(c.Before)
	return c.ReadCloser.Close()
}
