package engine

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/internal/wire"
)

// pacer remembers, per host, until when the host asked for no more
// requests (a 429 or 503 whose Retry-After or rate-limit fields ask for a
// wait), so that the retry layer's other operations wait for it too
// instead of meeting the same 429 (policy.RetryAfter.Pace). Its memory is
// bounded, and a host is forgotten once its time has passed.
type pacer struct {
	held  atomic.Int32 // hosts held: at 0 a request looks nothing up
	mu    sync.Mutex
	until map[string]time.Time
}

const (
	// maxPacedHosts bounds the hosts a pacer holds back at once.
	maxPacedHosts = 10_000
	// maxPace is the longest a host's answer holds back the other
	// requests when the policy sets no RetryAfter.Max: whatever a server
	// says, one answer does not close a host for longer.
	maxPace = time.Hour
)

// hold holds host back until then.
func (p *pacer) hold(host string, until, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = map[string]time.Time{}
	}
	if old, ok := p.until[host]; ok {
		if until.After(old) {
			p.until[host] = until
		}
		return
	}
	if len(p.until) >= maxPacedHosts {
		// Make room for a tenth of the bound at once, so that the scan is
		// paid once per maxPacedHosts/10 holds: ended holds first, then
		// any (a host forgotten is met again with a 429, and held again).
		for h, t := range p.until {
			if !t.After(now) {
				delete(p.until, h)
			}
		}
		for h := range p.until {
			if len(p.until) <= maxPacedHosts-maxPacedHosts/10 {
				break
			}
			delete(p.until, h)
		}
	}
	p.until[host] = until
	p.held.Store(int32(len(p.until)))
}

// heldUntil is when host's hold ends, or the zero time when it is not
// held; a hold that has ended is forgotten.
func (p *pacer) heldUntil(host string, now time.Time) time.Time {
	if p.held.Load() == 0 {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.until[host]
	if ok && !until.After(now) {
		delete(p.until, host)
		p.held.Store(int32(len(p.until)))
		return time.Time{}
	}
	return until
}

// pacedError is the error of an operation that stopped before sending:
// the host asked for no requests until past its deadline.
type pacedError struct {
	host  string
	until time.Time
}

func (e *pacedError) Error() string {
	return fmt.Sprintf("retrystack: %s asked for no requests until %s (its rate limit or Retry-After), past this request's deadline: nothing sent", e.host, e.until.Format(time.RFC3339Nano))
}

// hold holds the attempt's host back for the wait its answer asks for
// (its Retry-After, or the reset of a spent rate limit): at most
// RetryAfter.Max, or an hour.
func (o *httpOp) hold(u *url.URL, h http.Header) {
	now := o.e.now()
	ra := o.e.p.RetryAfter
	wait, found, ok := ra.Hint(h, now)
	if !found || !ok || wait <= 0 {
		return
	}
	limit := maxPace
	if ra.Max > 0 {
		limit = min(ra.Max, limit)
	}
	o.e.pace.hold(wire.HostKey(u), now.Add(min(wait, limit)), now)
}

// paced implements loopOp: until when the request's host asked for no
// requests, and the server as the attempt spans name it.
func (o *httpOp) paced() (string, string, int, time.Time) {
	if !o.e.p.RetryAfter.Pace || o.e.pace.held.Load() == 0 {
		return "", "", 0, time.Time{}
	}
	key := wire.HostKey(o.req.URL)
	until := o.e.pace.heldUntil(key, o.e.now())
	if until.IsZero() {
		return key, "", 0, until
	}
	host, port := wire.ServerAddress(o.req)
	return key, host, port, until
}
