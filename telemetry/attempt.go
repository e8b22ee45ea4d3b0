package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
)

type attemptLayer struct {
	t    *Telemetry
	next http.RoundTripper
}

// attemptSpan is one attempt's span and measurement, in one allocation
// with the body that ends it.
type attemptSpan struct {
	t       *Telemetry
	ctx     context.Context
	span    trace.Span
	start   time.Time
	method  method
	host    string
	port    int
	metered []attribute.KeyValue // the duration metric's, in attrs
	user    []attribute.KeyValue // Config.Attributes' for the operation
	timed   bool                 // the duration metric records: start is set
	body    wire.Watched[*attemptSpan]
	opts    [2]trace.SpanStartOption
	// attrs holds the attributes given at creation, which the SDK copies,
	// and then those of the response: the span's, then the metric's.
	attrs [6]attribute.KeyValue
}

func (a *attemptLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	var user []attribute.KeyValue
	if a.t.filter != nil || a.t.attributes != nil {
		traced, attrs := a.t.decided(req)
		if !traced {
			return wire.RoundTrip(a.next, req)
		}
		user = attrs
	}
	s := &attemptSpan{t: a.t, method: methodOf(req.Method), user: user}
	if s.timed = a.t.reqDuration.Enabled(req.Context()); s.timed {
		s.start = time.Now()
	}
	s.host, s.port = wire.ServerAddress(req)
	// The retry layer above, if any, numbers the send and watches the wire:
	// the connections it counts while this RoundTrip runs are this send's,
	// even when a layer between makes more sends (redirect hops).
	var resend int
	var before middleware.Wire
	op, inStack := middleware.OperationOf(req.Context())
	var solo *wire.Trace // this layer's own trace, outside a stack
	if inStack {
		resend = op.Sends() // the sends before this one, counted next to the base
		before = op.Wire(req.Context())
	}
	// What a sampler should see: the attributes known before the send.
	start := s.method.attrs(s.attrs[:0])
	start = append(start, semconv.ServerAddress(s.host), semconv.ServerPort(s.port), semconv.URLFull(urlFull(req, op)))
	if resend > 0 {
		start = append(start, semconv.HTTPRequestResendCount(resend))
	}
	s.opts = [2]trace.SpanStartOption{clientKind, trace.WithAttributes(start...)}
	ctx, span := a.t.tracer.Start(req.Context(), s.method.spanName(), s.opts[:]...)
	s.ctx, s.span = ctx, span
	r := req
	if !inStack && span.IsRecording() {
		solo = wire.GetTrace()
		defer wire.PutTrace(solo)
		cp := *solo.Client() // WithClientTrace composes into what it is given
		ctx = httptrace.WithClientTrace(ctx, &cp)
	}
	if span.SpanContext().IsValid() {
		r = req.WithContext(ctx)
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		a.t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	resp, err := wire.RoundTrip(a.next, r)
	if !span.IsRecording() && !a.t.reqDuration.Enabled(ctx) {
		span.End()
		return resp, err
	}

	// The span's own attributes first, then those it shares with the
	// duration metric.
	attrs := s.attrs[:0]
	var transparent int
	if span.IsRecording() {
		// Less the sends of hedges and redirect hops that ran meanwhile:
		// a hedge's connection is not a resend of this one.
		after := op.Wire(req.Context())
		if solo != nil {
			after = middleware.Wire{Conns: solo.Conns(), Peer: solo.Peer()}
		}
		transparent = after.Conns - before.Conns - (after.Marked - before.Marked) - 1
		if host, port, ok := splitAddr(after.Peer); ok {
			attrs = append(attrs, semconv.NetworkPeerAddress(host), semconv.NetworkPeerPort(port))
		}
		if n := op.Hedge(req.Context()); n > 0 {
			span.SetAttributes(AttrHedge.Int(n))
		}
		timeoutHeader := protocol.TimeoutHeader
		if inStack {
			timeoutHeader = op.TimeoutHeader() // the name the retry layer above sends, "" when it sends none
		}
		if v := r.Header[timeoutHeader]; timeoutHeader != "" && len(v) > 0 {
			if ms, err := strconv.ParseInt(v[0], 10, 64); err == nil {
				span.SetAttributes(AttrTimeLeft.Int64(ms))
			}
		}
	}
	own := len(attrs)
	if err == nil {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode), semconv.NetworkProtocolVersion(protocolVersion(resp)))
		if resp.StatusCode >= 400 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			if span.IsRecording() {
				span.SetStatus(codes.Error, "") // the status code says it all
			}
		}
	}
	s.metered = attrs[own:]
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		for range transparent {
			span.AddEvent(EventTransparent) // a send net/http made on its own
		}
	}
	if err != nil {
		s.finish(err)
		return nil, err
	}
	if !s.body.Watch(resp, s) {
		s.finish(nil)
	}
	return resp, nil
}

// finish ends the attempt: at once when it failed or its response has no
// body to read, else when its body is done (read to the end, closed, or
// failed: err). A caller's cancellation is not an error.
func (s *attemptSpan) finish(err error) {
	attrs := s.metered
	if err != nil && !errors.Is(err, context.Canceled) {
		kind := policy.KindOf(err)
		et := errorType(kind)
		attrs = append(attrs, et)
		if s.span.IsRecording() {
			s.span.SetAttributes(et)
			s.span.SetStatus(codes.Error, kind.String())
		}
	}
	s.span.End()
	if s.timed {
		if len(s.user) > 0 {
			attrs = append(attrs[:len(attrs):len(attrs)], s.user...)
		}
		s.t.reqDuration.Record(s.ctx, time.Since(s.start).Seconds(), httpconv.RequestMethodAttr(s.method.name), s.host, s.port, attrs...)
	}
}

// BodyDone implements wire.Watcher.
func (s *attemptSpan) BodyDone(err error) error {
	s.finish(err)
	return err
}

func (a *attemptLayer) CloseIdleConnections() { wire.CloseIdle(a.next) }

// decided returns whether the attempt req is traced and measured, and the
// operation's attributes of Config.Attributes: as the operation layer
// decided when it runs above (its span, or the mark of a request Filter
// left out, among the operation's observers), else by asking Filter and
// Attributes with req.
func (t *Telemetry) decided(req *http.Request) (traced bool, user []attribute.KeyValue) {
	op, _ := middleware.OperationOf(req.Context())
	for x := range op.Observers() {
		switch x := x.(type) {
		case *opSpan:
			if x.t == t {
				return true, x.user
			}
		case *untraced:
			if x.t == t {
				return false, nil
			}
		}
	}
	if t.filter != nil && !t.filter(req) {
		return false, nil
	}
	if t.attributes != nil {
		user = t.attributes(req)
	}
	return true, user
}

// urlFull is req's url.full: the operation span's, already made, when req
// has the operation's URL (its first hop, without Prepare). The operation
// span is found among the operation's observers: no context of its own.
func urlFull(req *http.Request, op middleware.Operation) string {
	for x := range op.Observers() {
		if s, ok := x.(*opSpan); ok && s.url == req.URL {
			return s.full
		}
	}
	return redactURL(req.URL)
}

// splitAddr gives network.peer.address and network.peer.port.
func splitAddr(a net.Addr) (string, int, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String(), a.Port, true
	case nil:
		return "", 0, false
	}
	host, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0, false
	}
	port, _ := strconv.Atoi(p)
	return host, port, true
}
