package wire

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// DrainLimit is the longest discarded body that is read so its connection
// can be reused: net/http's own limit for the redirects it follows
// (maxBodySlurpSize). A body known to be longer is closed unread.
const DrainLimit = 2 << 10

// DrainTime bounds the reading of a discarded body: a body that has not
// arrived by then is closed, and its connection with it. Reuse is worth a
// few milliseconds, never a stalled operation.
const DrainTime = 5 * time.Millisecond

// RoundTrip calls next as net/http's Client does, and returns what next
// returned made to keep the RoundTripper contract: a response together with
// an error loses the response (its body closed); no response and no error
// is an error; a nil Body becomes http.NoBody, unless the response claims a
// length, which is an error, as in net/http.
func RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	switch {
	case err != nil:
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	case resp == nil:
		return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", next)
	case resp.Body == nil:
		if resp.ContentLength > 0 && req.Method != http.MethodHead {
			return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a *Response with content length %d but a nil Body", next, resp.ContentLength)
		}
		resp.Body = http.NoBody
	}
	if resp.Request == nil {
		// net/http's Transport sets it; a mock often does not, and the
		// retry layer's report and the cookie layer's hop URL hang on it.
		resp.Request = req
	}
	return resp, nil
}

// Empty reports whether resp is known to have no body to read: net/http's
// NoBody, a length of 0, a 204 or 304, or the answer to a HEAD (HTTP/2
// gives those a body of its own, not NoBody).
func Empty(resp *http.Response) bool {
	switch {
	case resp.Body == http.NoBody, resp.ContentLength == 0,
		resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified:
		return true
	}
	return resp.Request != nil && resp.Request.Method == http.MethodHead
}

// Discard releases a response nobody will read: a short body (known to be
// at most DrainLimit, or of unknown length) is read for at most DrainTime
// so the connection can be reused, and every body is closed.
func Discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	body := resp.Body
	if body != http.NoBody && resp.ContentLength != 0 && resp.ContentLength <= DrainLimit {
		// A body that stalls is closed under the read, which ends it:
		// net/http's bodies may be closed while a Read is blocked.
		t := time.AfterFunc(DrainTime, func() { body.Close() })
		io.CopyN(io.Discard, body, DrainLimit+1)
		if !t.Stop() {
			return // the timer closed it: once is enough
		}
	}
	body.Close()
}

// ReadTime bounds the reading of a body that a layer turns into a value
// (an error response's first KiB): what has not arrived by then is left
// out, and the read reports it as cut short.
const ReadTime = 100 * time.Millisecond

// ReadLimited reads at most limit bytes of body for at most ReadTime and
// closes it. cut reports that the body was longer than limit, or failed, or
// stalled.
func ReadLimited(body io.ReadCloser, limit int64) (data []byte, cut bool) {
	t := time.AfterFunc(ReadTime, func() { body.Close() })
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	stopped := t.Stop()
	body.Close()
	if int64(len(data)) > limit {
		return data[:limit], true
	}
	return data, err != nil || !stopped
}

// Base is rt, or http.DefaultTransport when rt is nil: what every layer
// wraps when it is given no next RoundTripper.
func Base(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		return http.DefaultTransport
	}
	return rt
}

// CloseIdle calls rt's CloseIdleConnections, if it has one.
func CloseIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// IsUpgrade reports whether resp switches protocols: its Body is then the
// connection, an io.ReadWriteCloser, and must reach the caller as it is.
func IsUpgrade(resp *http.Response) bool {
	return resp.StatusCode == http.StatusSwitchingProtocols
}

// HasBody reports whether req carries a body to send.
func HasBody(req *http.Request) bool { return req.Body != nil && req.Body != http.NoBody }

// Replayable reports whether req can be sent again: it has no body, or a
// GetBody that makes a fresh copy. Every layer that sends a request twice
// (retry, hedge, a 307 or 308 redirect) asks this, and only this.
func Replayable(req *http.Request) bool { return !HasBody(req) || req.GetBody != nil }

// A Watcher is told, once, that a response body it watches is done.
type Watcher interface {
	// BodyDone is called once: with nil when the body is read to its end
	// or closed, or with the error of the read that failed first (not of
	// a read after Close: that is the caller's own doing). What it
	// returns is what that read, and every read after it, returns.
	BodyDone(err error) error
}

// Watched is a response body that tells its Watcher when it is done: the
// one "when the body is done" wrapper of the module, meant to sit in its
// watcher's own allocation (W is the watcher's type, a pointer or a func:
// one word rather than an interface's two). Close may come while a Read is
// blocked (a stalled drain), so the ending is guarded.
type Watched[W Watcher] struct {
	rc    io.ReadCloser
	w     W
	err   error         // what BodyDone made of the first failure
	state atomic.Uint32 // watchClosed, watchEnded
}

const (
	watchClosed = 1 << iota
	watchEnded
)

// Watch puts b in resp.Body, watched by w, and reports whether it did: a
// body known to be empty has nothing to wait for, and a 101's body is the
// connection, which reaches the caller as it is.
func (b *Watched[W]) Watch(resp *http.Response, w W) bool {
	if Empty(resp) || IsUpgrade(resp) {
		return false
	}
	b.rc, b.w = resp.Body, w
	resp.Body = b
	return true
}

func (b *Watched[W]) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		b.end(nil)
	case b.state.Load()&watchClosed != 0: // a read after Close: not the body's failure
	default:
		if e := b.end(err); e != nil {
			b.err, err = e, e
		}
	}
	return n, err
}

func (b *Watched[W]) Close() error {
	b.state.Or(watchClosed)
	err := b.rc.Close()
	b.end(nil)
	return err
}

func (b *Watched[W]) end(err error) error {
	if b.state.Or(watchEnded)&watchEnded == 0 {
		return b.w.BodyDone(err)
	}
	return nil
}
