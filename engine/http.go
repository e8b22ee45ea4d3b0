package engine

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
)

// Layer returns the HTTP retry layer, named "retry", running every request
// that passes through it under the engine's policy.
func (e *Engine) Layer() middleware.Layer {
	return middleware.Layer{Name: "retry", Wrap: func(next http.RoundTripper) http.RoundTripper {
		next = wire.Base(next)
		return &transport{e: e, next: next}
	}}
}

// transport is the HTTP retry layer's RoundTripper. It is safe for
// concurrent use.
type transport struct {
	e       *Engine
	next    http.RoundTripper
	inStack bool // Stack.Then wrapped it: set before any request
}

// InStack implements operation.Member.
func (t *transport) InStack() { t.inStack = true }

var _ http.RoundTripper = (*transport)(nil)

// StartOperation implements operation.Starter: the operations of a stack
// whose outermost retry layer is t start with t's state for the first
// hop in the same allocation.
func (t *transport) StartOperation(req *http.Request) (*http.Request, *operation.Operation) {
	s := new(started)
	req = s.Init(req, true)
	s.o.t = t
	s.o.owner.Layer = &s.o
	op := s.Operation()
	op.Reserve(&s.o.owner)
	return req, op
}

// started is an operation and the state of its retry layer's first hop:
// one allocation (576 bytes, a size class of its own).
type started struct {
	operation.Started
	o httpOp
}

// RoundTrip sends req, and again as the policy decides. The returned
// response is the last attempt's; its body keeps obeying the attempt and
// total deadlines until it is read to the end or closed. An error is an
// *Error or, with FailOnExhausted, an *ExhaustedError; both carry the
// Report, as does the response (see ReportOf).
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var op *operation.Operation
	if t.inStack {
		op = operation.From(req.Context())
	}
	var o *httpOp
	if op == nil {
		// Used without a Stack: the layer starts the operation itself,
		// and numbers its sends, even under another operation's context.
		s := new(started)
		req = s.Init(req, false)
		op = s.Operation()
		defer op.End()
		o = &s.o
	} else if w := op.Take(); w != nil {
		if x, ok := w.Layer.(*httpOp); ok && x.t == t {
			o = x
		} else {
			op.Reserve(w) // another retry layer's
		}
	}
	if o == nil {
		o = new(httpOp)
	}
	o.t = t
	o.owner.Layer = o
	return o.roundTrip(req, op)
}

// roundTrip runs the operation's hop through the retry loop.
func (o *httpOp) roundTrip(req *http.Request, op *operation.Operation) (resp *http.Response, err error) {
	e := o.t.e.pick(req)
	if e.p.IdempotencyKeys && !policy.Idempotent(req) {
		req = withKey(req, op)
	}
	o.e, o.req, o.operation = e, req, op
	o.rep = Report{Policy: e.p.Name, Layer: e.layer}
	o.rep.Attempts = o.rep.attempt[:0]
	o.signals = e.signals.Covers(req)
	var hooks context.Context = req.Context() // what hooks get: detached, if any hook needs it
	if e.detach {
		x := o.rareState()
		x.outside = operation.Detach(req.Context())
		hooks = &x.outside
	}

	if prev, ok := op.Claim(&o.owner); ok {
		// The operation's retry layer: the layers below read its attempt
		// and budget (middleware.Operation), and its attempts go out under
		// the operation's context and trace, as they came.
		defer func() { op.Unclaim(&o.owner, prev, err == nil) }()
		if prev != nil {
			if p, ok := prev.Layer.(*httpOp); ok {
				o.rep.Previous = &p.rep // the hop before, behind a redirect layer above
			}
		}
	} else {
		// A retry layer inside another: its attempts need a trace of
		// their own, composed with the operation's (the rarer way). Each
		// attempt's context, which the caller may keep, then reaches both:
		// neither goes back to the pool.
		x := o.rareState()
		x.trace = wire.GetTrace()
		x.trace.Unpooled()
		op.Trace().Unpooled()
		o.compose = true
	}
	if wire.HasBody(req) && req.GetBody == nil {
		// A body that cannot be made again (an SDK's upload): rewound,
		// or kept as it is sent, so that a retry can send it again.
		if rp := wire.NewReplay(req.Body, e.replayLimit, e.replay); rp.Replayable() {
			defer rp.Done()
			first, _ := rp.Reader()
			r := new(http.Request)
			*r = *req
			r.Body = first
			if rp.Concurrent() {
				r.GetBody = rp.GetBody // a hedge below, and net/http's own resends, replay it too
			}
			req, o.req = r, r
			o.rareState().rp = rp
		}
	}
	f := facts{
		replayable: wire.Replayable(req) || o.replay() != nil,
		covered:    e.p.Scope.Covers(req),
		idempotent: policy.Idempotent(req),
		keyed:      hasKey(req),
	}
	if req.Body != nil {
		f.body = req.Body
	}
	if e.p.Timeout > 0 {
		f.deadline = o.deadline(e.p.Timeout)
	}
	resp, err = run[*http.Response](req.Context(), hooks, e, o, f, &o.rep)
	// The cheap checks first: most operations push nothing back, and
	// finding the inbound state walks the context chain.
	if !e.signals.Off && pushesBack(&o.rep) {
		if st := inbound.From(req.Context()); st != nil {
			st.PushBack() // the service answering st's request tells its caller not to retry
		}
	}
	return resp, err
}

// CloseIdleConnections forwards to the next RoundTripper.
func (t *transport) CloseIdleConnections() {
	wire.CloseIdle(t.next)
}

// httpOp is one request under the retry loop, and what its layer tells
// the layers below: what every operation needs, in one allocation, and
// what few need in another, made when first needed (rareState). It holds as few
// pointers as it can: the collector scans each one.
type httpOp struct {
	t         *transport
	e         *Engine // t's, or a route's
	req       *http.Request
	operation *operation.Operation
	attempts  int32                 // attempts made, for numbering without a Stack
	refreshed bool                  // RefreshAuth ran for this operation
	compose   bool                  // each attempt composes o's trace with the operation's
	signals   bool                  // o speaks the cross-layer protocol with the request's host
	rare      *httpRare             // nil until needed
	rep       Report                // written as the operation runs; ReportOf's
	owner     operation.Owner       // what the layers below read, when o owns the operation
	body      wire.Watched[*httpOp] // the returned response's Body
}

// What the loop finds in an HTTP operation, checked here: a method that
// drifted from its interface would otherwise go unused without a word.
var (
	_ loopOp[*http.Response]        = (*httpOp)(nil)
	_ observable                    = (*httpOp)(nil)
	_ replayable                    = (*httpOp)(nil)
	_ paceable                      = (*httpOp)(nil)
	_ cookieCarrier[*http.Response] = (*httpOp)(nil)
)

// httpRare is what an operation needs only on its rarer paths.
type httpRare struct {
	trace   *wire.Trace       // o's own, when it does not own the operation (compose)
	rp      *wire.Replay      // the body's replay, when it has no GetBody
	carried []carriedCookie   // Set-Cookie lines of discarded responses, for the final one
	outside operation.Context // the hooks' and RefreshAuth's: the operation detached (Engine.detach)
	final   finalDeadlines    // what bounds the returned body until it is done, when something does but the caller
}

// rareState returns o's rare part, made if need be. Only the goroutine
// running the operation's loop makes it.
func (o *httpOp) rareState() *httpRare {
	if o.rare == nil {
		o.rare = new(httpRare)
	}
	return o.rare
}

// wireTrace is the trace o's attempts are watched with: the operation's,
// or o's own when it does not own the operation.
func (o *httpOp) wireTrace() *wire.Trace {
	if o.compose {
		return o.rare.trace
	}
	return o.operation.Trace()
}

// replay is the body's replay, or nil.
func (o *httpOp) replay() *wire.Replay {
	if o.rare == nil {
		return nil
	}
	return o.rare.rp
}

// Budget implements operation.OwnerLayer.
func (o *httpOp) Budget() policy.Budget { return o.e.p.Budget }

// resend numbers the send about to be made: the sends of the operation so
// far (the stack's counter next to the base transport counts them all,
// redirect hops included), or this layer's own attempts outside a Stack.
func (o *httpOp) resend() int {
	if o.operation.Counted() {
		return o.operation.Sends()
	}
	return int(o.attempts)
}

func (o *httpOp) attempt(ctx context.Context, n int) (*http.Response, attemptInfo, error) {
	var body io.ReadCloser
	if n > 1 && wire.HasBody(o.req) {
		var err error
		if rp := o.replay(); rp != nil {
			rp.Retire() // the last attempt's writer, if it reads on, cannot take the body from this one
			body, err = rp.Reader()
		} else {
			body, err = o.req.GetBody()
		}
		if err != nil {
			return nil, attemptInfo{processed: policy.NotSent}, err
		}
	}
	tr := o.wireTrace()
	tr.Reset()
	resend := o.resend()
	o.attempts++
	o.owner.Attempt.Store(int32(n))
	if o.compose {
		// WithClientTrace composes the caller's trace into the one it is
		// given: then each attempt needs a copy of its own.
		cp := *tr.Client()
		// The layers below mark their hops and hedges on o's trace, and
		// ReportOf finds o's report for a response o made.
		ctx = operation.WithAttempt(httptrace.WithClientTrace(ctx, &cp), &operation.Attempt{Owner: &o.owner, Trace: tr})
	}
	attemptHdr, timeoutHdr, headers := o.signalHeaders(ctx, n)
	r := o.req
	if ctx != r.Context() || body != nil || o.e.prepare != nil || headers {
		// A copy of its own, never reused: the transport may still hold
		// the previous attempt's.
		r = o.req.WithContext(ctx)
	}
	if body != nil {
		r.Body = body
	}
	if o.e.prepare != nil {
		// Prepare may change this attempt's URL, never the caller's.
		u := *o.req.URL
		r.URL = &u
	}
	if o.e.prepare != nil || headers {
		// Prepare and the headers change this attempt's header, never the
		// caller's.
		r.Header = withSignals(o.req.Header, o.e.attemptHeader, attemptHdr, o.e.timeoutHeader, timeoutHdr, !o.e.signals.Off)
	}
	if o.e.prepare != nil {
		if err := o.e.prepare(r, n); err != nil {
			if r.Body != nil {
				r.Body.Close() // on the first attempt, the caller's
			}
			return nil, attemptInfo{processed: policy.NotSent, resend: resend}, err
		}
		// The time left when the request leaves, not when Prepare began
		// (a token fetch can take a while): as gRPC sets grpc-timeout at
		// send time, after per-call credentials.
		protocol.Restamp(r, o.TimeoutHeader())
	}
	resp, err := wire.RoundTrip(o.t.next, r)
	if err == nil && o.e.p.RetryAfter.Pace && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		o.hold(o.req.URL, resp.Header) // the host the caller addressed, whatever a Prepare made of it: as paced looks it up
	}
	info := attemptInfo{
		processed:   processedBy(err, tr.Wrote(), tr.Conns() > 0),
		transparent: tr.Transparent(),
		hedges:      tr.Hedges(),
		redirects:   tr.Hops(),
		held:        tr.Held(),
		injected:    tr.Injected(),
		resend:      resend,
	}
	if info.transparent > 0 && !o.compose && o.operation.Counted() {
		o.operation.AddHidden(info.transparent) // the operation's sends are every send, the transport's own included
	}
	if err == nil {
		info.status, info.header = resp.StatusCode, resp.Header
	}
	return resp, info, err
}

func (o *httpOp) decide(n int, resp *http.Response, info attemptInfo, err error) policy.Decision {
	//lint:ignore SA1019 net/http's Client still cancels a RoundTripper it does not know through Request.Cancel (http.Client.Timeout)
	if err != nil && o.req.Cancel != nil {
		select {
		//lint:ignore SA1019 as above
		case <-o.req.Cancel:
			// net/http's Client cancels a RoundTripper it does not know
			// (a stack) through Request.Cancel, on a timer of its own that
			// can fire before the context's deadline does: the caller gave
			// up all the same.
			if dl, ok := o.req.Context().Deadline(); ok && !time.Now().Before(dl) {
				return policy.Stop(policy.StopDeadline)
			}
			return policy.Stop(policy.StopCancelled)
		default:
		}
	}
	if err == nil && o.refreshAuth(n, resp) {
		return policy.Retry(causeAuth)
	}
	d := o.e.p.Classify(policy.Attempt{Request: o.req, Response: resp, Err: err, Number: n, Processed: info.processed})
	if d.Retry && err == nil && o.signals && strings.EqualFold(resp.Header.Get(o.e.shouldRetryHeader), "false") {
		// A layer below retried already, or the server is overloaded:
		// retrying here would multiply its load.
		return policy.Stop(policy.StopPushback)
	}
	if d.Retry && err != nil && policy.KindOf(err).ProtocolNack() {
		// The transport resends refused and GOAWAY'd streams itself and
		// returns them only once it gives up or the stream may have been
		// processed: a second round of retries on top would multiply them.
		return policy.Stop(policy.StopNonRetryable)
	}
	return d
}

// discard shows the response to the observer a layer above installed,
// then releases it without letting a stalled body hold the operation.
// The attempt's request is not sent further: a server that answered
// before reading the whole body (a proxy's 502 or 413 to an upload) may
// leave net/http's writer reading it while the response is released (it
// waits up to 50 ms for the write to end), and that writer must not take
// a kept body past its replay buffer, which would end the retries the
// discard is for.
func (o *httpOp) discard(resp *http.Response) (lost []string) {
	if rp := o.replay(); rp != nil {
		rp.Retire()
	}
	lost = o.cookies(resp)
	if o.observed() {
		o.emit(middleware.Event{Name: protocol.EventDiscarded, Attrs: []attribute.KeyValue{semconv.HTTPResponseStatusCode(resp.StatusCode)}})
	}
	wire.Discard(resp)
	return lost
}

// deadline is shared by every hop of the stack's operation: the first
// hop's retry layer fixes it.
func (o *httpOp) deadline(d time.Duration) time.Time {
	return o.operation.Deadline(d)
}

// report is what ReportOf returns.
func (o *httpOp) report() *Report { return &o.rep }

// Failed implements operation.Result.
func (o *httpOp) Failed() bool { return o.rep.failed() }

func (o *httpOp) observed() bool { return o.operation.Observed() }

// emit tells e to the operation's observers.
func (o *httpOp) emit(e middleware.Event) {
	o.operation.EachObserver(func(x any) { x.(middleware.Observer).Observe(e) })
}

// replayErr implements replayable: a kept body that outgrew its replay buffer
// cannot be sent again, nor one whose rewinding Seek fails (it is rewound
// here, before the retry is planned, so that the caller gets the answer
// in hand rather than an attempt that never left).
func (o *httpOp) replayErr() error {
	rp := o.replay()
	if rp == nil {
		return nil
	}
	return rp.Rewind()
}
