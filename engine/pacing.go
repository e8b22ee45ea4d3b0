package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
