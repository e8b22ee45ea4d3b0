package engine

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/retrystack/retrystack/internal/keyed"
	"github.com/retrystack/retrystack/internal/wire"
)

// pacer remembers, per host, until when the host asked for no more
// requests (a 429 or 503 whose Retry-After or rate-limit fields ask for a
// wait), so that the retry layer's other operations wait for it too
// instead of meeting the same 429 (policy.RetryAfter.Pace). Its memory is
// bounded (holds that ended go first), and a host is forgotten once its
// time has passed.
type pacer struct {
	until keyed.Map[time.Time]
}

const (
	// maxPacedHosts bounds the hosts a pacer holds back at once.
	maxPacedHosts = 10_000
	// maxPace is the longest a host's answer holds back the other
	// requests when the policy sets no RetryAfter.Max: whatever a server
	// says, one answer does not close a host for longer.
	maxPace = time.Hour
)

// newPacer returns a pacer on the clock now.
func newPacer(now func() time.Time) *pacer {
	p := new(pacer)
	p.until.Max = maxPacedHosts
	p.until.Forget = func(until time.Time, force bool) bool { return force || !until.After(now()) }
	return p
}

// hold holds host back until then, or longer if it is held longer.
func (p *pacer) hold(host string, until time.Time) {
	p.until.Update(host, func(old time.Time, ok bool) (time.Time, bool) {
		if ok && !until.After(old) {
			return old, true
		}
		return until, true
	})
}

// heldUntil is when host's hold ends, or the zero time when it is not
// held; a hold that has ended is forgotten.
func (p *pacer) heldUntil(host string, now time.Time) time.Time {
	if p.until.Len() == 0 {
		return time.Time{}
	}
	until, ok := p.until.Load(host)
	if !ok {
		return time.Time{}
	}
	if !until.After(now) {
		p.until.Update(host, func(cur time.Time, ok bool) (time.Time, bool) { return cur, ok && cur.After(now) })
		return time.Time{}
	}
	return until
}

// PacedUntil is until when the host of u asked e's requests to wait (a
// 429 or 503 with Retry-After, or a spent rate limit, under
// policy.RetryAfter.Pace): a request to it sent now would wait until then,
// or stop at once if its deadline comes first. The zero time when the
// host asked for no wait. The hold is the host's, as net/http dials it
// ("API.example.com" and "api.example.com:443" are one): every path, and
// every route of e, waits for it. These are e's own holds: a request waits
// for a longer one that policy.RetryAfter.Shared knows of too.
func (e *Engine) PacedUntil(u *url.URL) time.Time {
	return e.pace.heldUntil(wire.HostKey(u), e.now())
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
	key, until := wire.HostKey(u), now.Add(min(wait, limit))
	o.e.pace.hold(key, until)
	if ra.Shared != nil {
		ra.Shared.Hold(o.req, key, until)
	}
}

// paced implements paceable: until when the request's host asked for no
// requests (this client's hold, or a longer one policy.RetryAfter.Shared
// knows of), and the server as the attempt spans name it.
func (o *httpOp) paced() (string, string, int, time.Time) {
	ra := o.e.p.RetryAfter
	if !ra.Pace || (o.e.pace.until.Len() == 0 && ra.Shared == nil) {
		return "", "", 0, time.Time{}
	}
	key := wire.HostKey(o.req.URL)
	now := o.e.now()
	until := o.e.pace.heldUntil(key, now)
	if ra.Shared != nil {
		if shared := ra.Shared.HeldUntil(o.req, key); shared.After(until) && shared.After(now) {
			until = shared // another client's hold: waited for as this one's own
		}
	}
	if until.IsZero() {
		return key, "", 0, until
	}
	host, port := wire.ServerAddress(o.req)
	return key, host, port, until
}
