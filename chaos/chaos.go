package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrystack/retrystack/internal/configerr"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/middleware"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/net/http/httpguts"
)

// Kind is what a fault does.
type Kind uint8

const (
	// Latency waits Delay, plus up to Jitter at random, before the
	// request goes on (or until its context ends).
	Latency Kind = iota + 1
	// Status answers with Status and Header in place of sending: the
	// server receives nothing.
	Status
	// Refuse fails before sending, as a refused connection (a dial
	// error wrapping ECONNREFUSED): the server receives nothing, and a
	// retry layer above knows it was not sent.
	Refuse
	// Reset sends the request, then throws the answer away and fails as
	// a reset connection (ECONNRESET): the server has the request, and
	// the caller cannot know what it did with it.
	Reset
	// CutBody ends the answer's body after After bytes, with
	// io.ErrUnexpectedEOF (a shorter body ends as it would have).
	CutBody
	// StallBody stops the answer's body after After bytes, until the
	// request's context ends or the body is closed.
	StallBody
)

var kindNames = [...]string{Latency: "latency", Status: "status", Refuse: "refuse", Reset: "reset", CutBody: "cut-body", StallBody: "stall-body"}

// String is the kind's name: latency, status, refuse, reset, cut-body or
// stall-body, as in events and in Config.Header's values.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// A Fault is one fault the layer injects: its kind, its rate, its scope
// and what it needs of its kind's fields (the others must stay zero). A
// request is in a fault's scope when it matches every scope field set.
type Fault struct {
	Kind Kind
	// Rate is the share of the requests in scope that get the fault, in
	// [0, 1]. 0: only a request that asks for it (Config.Header).
	Rate float64

	// Hosts, in lower case ("api.example.com" matches on any port,
	// "api.example.com:8443" on that port only, the scheme's default
	// port when the URL names none), compared as net/http dials them
	// (an internationalised name and its punycode are one host, as for
	// the breaker, the throttle and pacing); Methods, in capitals;
	// Paths, prefixes of the URL's path. Empty: any.
	Hosts, Methods, Paths []string
	// Attempts limits the fault to the first Attempts attempts of an
	// operation (read from middleware.Operation; above the retry layer
	// every request is a first attempt): 1 for the first only; 0: all.
	Attempts int

	Delay, Jitter time.Duration // Latency
	Status        int           // Status: 100 to 599
	Header        http.Header   // Status: the answer's headers (Retry-After, RateLimit)
	After         int64         // CutBody, StallBody: the bytes that pass first
}

// Config configures a fault-injection layer. The zero Config injects
// nothing, and is an error: a chaos layer never runs by accident.
type Config struct {
	// Faults are tried in order on each request; several can hit one
	// request (a latency, then a reset).
	Faults []Fault
	// Seed seeds the layer's random numbers (math/rand/v2's PCG): the same
	// seed and the same requests, in the same order, get the same
	// faults. Zero is a seed like any other.
	Seed uint64
	// Header, when set, names a request header by which a request asks
	// for faults, as Envoy's fault filter allows: its value lists kinds
	// ("reset", "latency,status"), and the request gets every fault of
	// those kinds whose scope it is in, whatever their Rate. A request
	// cannot ask for a fault the Config does not have. "": off.
	Header string
}

// Layer returns a fault-injection layer named "chaos". A Config that is
// bad, or whose faults can never fire, makes the layer invalid: NewStack
// reports it, a *policy.ConfigError naming the field. The layer is safe
// for concurrent use (its random numbers are drawn under a lock); a fault
// that sends nothing closes the request's body, and one that replaces an
// answer (a reset) drains and closes the answer's.
func Layer(cfg Config) middleware.Layer {
	c, err := newChaos(cfg)
	if err != nil {
		return middleware.Layer{Name: "chaos", Err: err}
	}
	return middleware.Layer{Name: "chaos", Wrap: func(next http.RoundTripper) http.RoundTripper {
		return &transport{c: c, next: wire.Base(next)}
	}}
}

func newChaos(cfg Config) (*chaos, error) {
	bad := configerr.For("chaos.Config.")
	if cfg.Header != "" && !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, bad("Header", cfg.Header, "not a header name")
	}
	fire := false
	faults := make([]Fault, len(cfg.Faults))
	for i, f := range cfg.Faults {
		at := func(field string) string { return fmt.Sprintf("Faults[%d].%s", i, field) }
		switch {
		case f.Kind < Latency || f.Kind > StallBody:
			return nil, bad(at("Kind"), f.Kind, "unknown kind")
		case !(f.Rate >= 0 && f.Rate <= 1): // NaN too
			return nil, bad(at("Rate"), f.Rate, "must be within [0, 1]")
		case f.Attempts < 0:
			return nil, bad(at("Attempts"), f.Attempts, "must not be negative (0: every attempt)")
		case f.Delay < 0:
			return nil, bad(at("Delay"), f.Delay, "must not be negative")
		case f.Jitter < 0:
			return nil, bad(at("Jitter"), f.Jitter, "must not be negative")
		case f.After < 0:
			return nil, bad(at("After"), f.After, "must not be negative")
		case f.Kind == Latency && f.Delay == 0 && f.Jitter == 0:
			return nil, bad(at("Delay"), f.Delay, "a latency fault needs a Delay or a Jitter")
		case f.Kind == Status && (f.Status < 100 || f.Status > 599):
			return nil, bad(at("Status"), f.Status, "must be between 100 and 599")
		case f.Kind != Latency && (f.Delay != 0 || f.Jitter != 0):
			return nil, bad(at("Delay"), f.Delay, "only a latency fault waits")
		case f.Kind != Status && f.Status != 0:
			return nil, bad(at("Status"), f.Status, "only a status fault answers")
		case f.Kind != Status && f.Header != nil:
			return nil, bad(at("Header"), f.Header, "only a status fault answers")
		case f.Kind != CutBody && f.Kind != StallBody && f.After != 0:
			return nil, bad(at("After"), f.After, "only a body fault cuts a body")
		}
		for j, h := range f.Hosts {
			name, port := splitHost(h)
			if name == "" || strings.ContainsAny(h, "/ ") || h != strings.ToLower(h) || strings.HasSuffix(h, ":") || strings.Trim(port, "0123456789") != "" {
				return nil, bad(at(fmt.Sprintf("Hosts[%d]", j)), h, "matches no host: want a host in lower case, as api.example.com or api.example.com:8443")
			}
		}
		for j, m := range f.Methods {
			if m == "" || m != strings.ToUpper(m) || !httpguts.ValidHeaderFieldName(m) {
				return nil, bad(at(fmt.Sprintf("Methods[%d]", j)), m, "matches no request: want a method in capitals, as GET")
			}
		}
		for j, p := range f.Paths {
			if !strings.HasPrefix(p, "/") {
				return nil, bad(at(fmt.Sprintf("Paths[%d]", j)), p, "matches no path: want a prefix starting with /")
			}
		}
		if f.Rate > 0 || cfg.Header != "" {
			fire = true
		}
		f.Header = f.Header.Clone()
		faults[i] = f
	}
	if !fire {
		reason := "no fault can fire: every Rate is 0 and no Header can ask for one"
		if len(cfg.Faults) == 0 {
			reason = "no fault can fire: none is configured"
		}
		return nil, bad("Faults", len(cfg.Faults), reason)
	}
	cfg.Faults = faults
	if cfg.Header != "" {
		cfg.Header = http.CanonicalHeaderKey(cfg.Header)
	}
	return &chaos{cfg: cfg, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}, nil
}

type chaos struct {
	cfg Config
	mu  sync.Mutex // rnd's
	rnd *rand.Rand
}

// draw is a number in [0, 1) from the seeded source.
func (c *chaos) draw() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rnd.Float64()
}

// inScope reports whether req, attempt n of its operation, is in f's
// scope.
func inScope(f *Fault, req *http.Request, n int) bool {
	if f.Attempts > 0 && max(n, 1) > f.Attempts {
		return false
	}
	if len(f.Methods) > 0 && !contains(f.Methods, req.Method) {
		return false
	}
	if len(f.Paths) > 0 {
		ok := false
		for _, p := range f.Paths {
			ok = ok || strings.HasPrefix(req.URL.Path, p)
		}
		if !ok {
			return false
		}
	}
	if len(f.Hosts) > 0 {
		ok := false
		for _, h := range f.Hosts {
			ok = ok || hostMatches(h, req.URL)
		}
		if !ok {
			return false
		}
	}
	return true
}

// splitHost splits a Hosts entry into its name and port ("" for none).
func splitHost(h string) (name, port string) {
	switch {
	case strings.HasPrefix(h, "["): // [v6] or [v6]:port
		if end := strings.IndexByte(h, ']'); end > 0 {
			return h[1:end], strings.TrimPrefix(h[end+1:], ":")
		}
	case strings.Count(h, ":") == 1:
		name, port, _ = strings.Cut(h, ":")
		return name, port
	}
	return h, ""
}

// hostMatches reports whether u's host is h: its name, and its port when
// h names one (the scheme's default port when u names none). Both sides
// are the host as net/http dials it (wire.HostKey: lower case, an
// internationalised name in punycode, no default port), as the breaker,
// the throttle and pacing key their hosts.
func hostMatches(h string, u *url.URL) bool {
	have, want := wire.HostKey(u), wire.HostKey(&url.URL{Scheme: u.Scheme, Host: h})
	if _, port := splitHost(h); port != "" {
		return want == have
	}
	haveName, _ := splitHost(have)
	wantName, _ := splitHost(want)
	return haveName == wantName
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// asked reports whether req asks for faults of kind k by the header.
func (c *chaos) asked(req *http.Request, k Kind) bool {
	if c.cfg.Header == "" {
		return false
	}
	for _, v := range req.Header.Values(c.cfg.Header) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(part) == k.String() {
				return true
			}
		}
	}
	return false
}

type transport struct {
	c    *chaos
	next http.RoundTripper
}

func (t *transport) CloseIdleConnections() { wire.CloseIdle(t.next) }

// plan is what the faults that hit one request do.
type plan struct {
	delay          time.Duration
	status, refuse *Fault
	reset          bool
	body           *Fault
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.c
	op, _ := middleware.OperationOf(req.Context())
	n := op.Attempt()
	var p plan
	hit := false
	for i := range c.cfg.Faults {
		f := &c.cfg.Faults[i]
		if !inScope(f, req, n) {
			continue
		}
		// One draw per fault in scope, asked for or not: a run with the
		// same seed and requests draws the same numbers.
		if r := c.draw(); !(r < f.Rate) && !c.asked(req, f.Kind) {
			continue
		}
		hit = true
		switch f.Kind {
		case Latency:
			d := f.Delay
			if f.Jitter > 0 {
				d += time.Duration(c.draw() * float64(f.Jitter))
			}
			p.delay = satAdd(p.delay, d)
			emit(req.Context(), op, f.Kind, attribute.Float64(protocol.AttrChaosDelay, d.Seconds()))
		case Status:
			if p.status == nil && p.refuse == nil {
				p.status = f
			}
		case Refuse:
			if p.status == nil && p.refuse == nil {
				p.refuse = f
			}
		case Reset:
			p.reset = true
		case CutBody, StallBody:
			if p.body == nil {
				p.body = f
			}
		}
	}
	if !hit {
		return t.next.RoundTrip(req)
	}
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close() // the RoundTripper's, even when it sends nothing
		}
	}
	if p.delay > 0 {
		tm := time.NewTimer(p.delay)
		select {
		case <-tm.C:
		case <-req.Context().Done():
			tm.Stop()
			closeBody()
			return nil, req.Context().Err()
		}
	}
	switch {
	case p.refuse != nil:
		emit(req.Context(), op, Refuse)
		closeBody()
		return nil, &injected{kind: Refuse, err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	case p.status != nil:
		emit(req.Context(), op, Status, attribute.Int("http.response.status_code", p.status.Status))
		closeBody()
		h := p.status.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{
			Status: fmt.Sprintf("%d %s", p.status.Status, http.StatusText(p.status.Status)), StatusCode: p.status.Status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: http.NoBody, Request: req,
		}, nil
	}
	resp, err := wire.RoundTrip(t.next, req)
	if err != nil {
		return nil, err // it failed by itself: nothing to inject
	}
	if p.reset && !wire.IsUpgrade(resp) {
		emit(req.Context(), op, Reset)
		wire.Discard(resp)
		return nil, &injected{kind: Reset, err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	}
	if p.body != nil && !wire.IsUpgrade(resp) && resp.Body != http.NoBody {
		emit(req.Context(), op, p.body.Kind, attribute.Int64(protocol.AttrChaosAfter, p.body.After))
		resp.Body = &faultyBody{body: resp.Body, kind: p.body.Kind, left: p.body.After, ctx: req.Context(), closed: make(chan struct{})}
		resp.ContentLength = -1 // it will not be what the server said
	}
	return resp, nil
}

func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// emit tells the operation a fault was injected into the attempt under
// ctx: its observers, and the retry layer above, which names it in the
// attempt's record.
func emit(ctx context.Context, op middleware.Operation, k Kind, attrs ...attribute.KeyValue) {
	op.MarkInjected(ctx, k.String())
	op.Emit(middleware.Event{Name: protocol.EventChaos, Attrs: append([]attribute.KeyValue{
		attribute.Bool(protocol.AttrChaosInjected, true), attribute.String(protocol.AttrChaosFault, k.String())}, attrs...)})
}

// injected is an injected transport failure: it wraps the error a real
// one would be (errors.Is finds syscall.ECONNREFUSED or ECONNRESET), and
// says it was injected.
type injected struct {
	kind Kind
	err  error
}

func (e *injected) Error() string { return "chaos: injected " + e.kind.String() + ": " + e.err.Error() }
func (e *injected) Unwrap() error { return e.err }

// faultyBody cuts or stalls a body after left bytes.
type faultyBody struct {
	body      io.ReadCloser
	kind      Kind
	left      int64
	ctx       context.Context
	closed    chan struct{}
	closeOnce sync.Once
}

// errCut is the error of a body cut short.
var errCut = fmt.Errorf("chaos: injected cut-body: %w", io.ErrUnexpectedEOF)

func (b *faultyBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.kind == CutBody {
			return 0, errCut
		}
		select {
		case <-b.ctx.Done():
			return 0, fmt.Errorf("chaos: injected stall-body: %w", b.ctx.Err())
		case <-b.closed:
			return 0, errors.New("chaos: injected stall-body: read after Close")
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if err == io.EOF && b.left > 0 {
		return n, io.EOF // the body was shorter than After: it ends as it did
	}
	if err == io.EOF {
		err = nil // the fault comes at the next Read
	}
	return n, err
}

func (b *faultyBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.body.Close()
}
