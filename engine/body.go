package engine

import (
	"context"
	"net/http"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/policy"
)

// keep hands resp to the caller with its body watched: the deadlines end
// when it is read to the end or closed, and a read that fails sets the
// report's stop and returns an *Error. A body known to be empty has nothing
// to watch; an upgraded connection (101) is the caller's as it is, no
// deadline of the engine's bounding it.
func (o *httpOp) keep(resp *http.Response, d deadlines) *http.Response {
	_, o.rep.Replayed = resp.Header[protocol.Replayed]
	// The caller's context is the request's, and the report o's: only
	// what differs is kept.
	if d.cancelOp != nil || d.cancelAt != nil {
		o.rareState().final = finalDeadlines{op: d.op, attempt: d.attempt, cancelOp: d.cancelOp, cancelAt: d.cancelAt}
	}
	o.carry(resp)
	if !o.body.Watch(resp, o) {
		d.release()
	}
	return resp
}

// finalDeadlines are the deadlines of the returned response's body, less
// what httpOp holds anyway.
type finalDeadlines struct {
	op, attempt        context.Context
	cancelOp, cancelAt context.CancelFunc
}

// BodyDone implements wire.Watcher for the returned response's body: the
// deadlines end, and a read that failed names its stop in the report and
// comes back as an *Error.
func (o *httpOp) BodyDone(err error) error {
	caller := o.req.Context()
	d := deadlines{caller: caller, op: caller, attempt: caller}
	if x := o.rare; x != nil && x.final.op != nil {
		f := &x.final
		d.op, d.attempt, d.cancelOp, d.cancelAt = f.op, f.attempt, f.cancelOp, f.cancelAt
	}
	defer d.release()
	if err == nil {
		return nil
	}
	stop, ok := d.stopFor()
	if !ok {
		stop = policy.StopBodyFailed
	}
	o.rep.Stop = stop
	return &Error{Report: &o.rep, Err: err}
}
