package crosslayer

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/internal/inbound"
	"github.com/retrystack/retrystack/internal/protocol"
	"github.com/retrystack/retrystack/internal/wire"
	"github.com/retrystack/retrystack/policy"
)

// Signals names the protocol's headers and the hosts a retry layer speaks
// it with. Client and services must agree on the names.
type Signals struct {
	Attempt     string // "" means Retrystack-Attempt
	Timeout     string // "" means Retrystack-Timeout-Ms
	ShouldRetry string // "" means Retrystack-Should-Retry
	// To names the hosts a retry layer speaks the protocol with: on a
	// request to one of them it sends the request headers and obeys a "do
	// not retry". nil, the zero value: none, since a third-party server
	// (S3, Stripe) has no use for them, and must not be able to stop
	// retries. A chain of services turns it on in one line:
	// To: &policy.Scope{} (every host), or &policy.Scope{Hosts: ...}.
	To *policy.Scope
	// Off stops a retry layer from speaking the protocol whatever To says;
	// Handler then does nothing.
	Off bool
}

// Covers reports whether a retry layer speaks the protocol on req.
func (s Signals) Covers(req *http.Request) bool {
	return !s.Off && s.To != nil && s.To.Covers(req)
}

// Names returns the three header names in use.
func (s Signals) Names() (attempt, timeout, shouldRetry string) {
	attempt, timeout, shouldRetry = protocol.AttemptHeader, protocol.TimeoutHeader, protocol.ShouldRetryHeader
	if s.Attempt != "" {
		attempt = http.CanonicalHeaderKey(s.Attempt)
	}
	if s.Timeout != "" {
		timeout = http.CanonicalHeaderKey(s.Timeout)
	}
	if s.ShouldRetry != "" {
		shouldRetry = http.CanonicalHeaderKey(s.ShouldRetry)
	}
	return attempt, timeout, shouldRetry
}

// defaultMaxTimeout is the longest deadline Handler takes from a request
// when Config.MaxTimeout is 0.
const defaultMaxTimeout = time.Minute

// Config configures Handler.
type Config struct {
	// MaxTimeout caps the deadline a request's Timeout header may set: a
	// caller cannot make the service work longer than this. 0 means
	// one minute.
	MaxTimeout time.Duration
	Signals    Signals
}

// Handler serves next with the protocol's service half. It reads the
// request's Timeout header into the request context's deadline (capped by
// MaxTimeout; a context never gets a later deadline than it had) and its
// Attempt header into the context, where the retry layers of the clients
// next calls with that context find them. When one of those retry layers
// gives up after retrying, runs out of retry budget, or is told not to
// retry, the response — if its status is 5xx or 429 — gets ShouldRetry:
// false.
//
// Handler consumes the two request headers: next (a proxy) does not see
// them. One that does not parse, or is negative, is ignored; a huge one is
// capped. A caller that sends no Timeout header gets no deadline from
// Handler.
//
// The ResponseWriter passed to next implements exactly those of
// http.Flusher, http.Hijacker, io.ReaderFrom and http.Pusher that the
// server's writer implements — over HTTP/1.1 all but Pusher (so io.Copy from
// an *os.File still uses sendfile), over HTTP/2 Flusher and Pusher but not
// Hijacker — and always Unwrap, so http.ResponseController reaches the
// original (deadlines, full duplex). It does not implement the deprecated
// http.CloseNotifier: use the request's context. A hijacked connection is
// the handler's, without pushback. A handler that writes its status before
// its outbound calls are done cannot carry a pushback: the header goes out
// with the status.
func Handler(next http.Handler, cfg Config) http.Handler {
	if cfg.Signals.Off {
		return next
	}
	maxTimeout := cfg.MaxTimeout
	if maxTimeout <= 0 {
		maxTimeout = defaultMaxTimeout
	}
	attemptName, timeoutName, shouldRetryName := cfg.Signals.Names()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &inbound.State{Attempt: 1}
		st.Attempt, st.Max = parseAttempt(r.Header.Get(attemptName))
		ctx := r.Context()
		if d, ok := parseTimeout(r.Header.Get(timeoutName), maxTimeout); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		// Consumed: a proxy that forwards the request (httputil.ReverseProxy)
		// must not pass the caller's values on as its own.
		r.Header.Del(attemptName)
		r.Header.Del(timeoutName)
		pw := &pushbackWriter{ResponseWriter: w, st: st, name: shouldRetryName}
		next.ServeHTTP(pw.writer(wire.OptionalOf(w)), r.WithContext(inbound.With(ctx, st)))
	})
}

// Position is where an inbound request sits in its caller's retries.
type Position struct {
	Attempt int // 1 for a first attempt, or when the caller did not say
	Max     int // the caller's most attempts; 0 when it did not say
}

// PositionOf returns the position Handler found for the request ctx
// belongs to; ok is false outside Handler.
func PositionOf(ctx context.Context) (p Position, ok bool) {
	st := inbound.From(ctx)
	if st == nil {
		return Position{}, false
	}
	return Position{Attempt: st.Attempt, Max: st.Max}, true
}

// maxAttempt bounds what an Attempt header may claim.
const maxAttempt = 10_000

// parseAttempt reads "N" or "N; max=M" (parameters in any case, unknown
// ones ignored); anything else is attempt 1.
func parseAttempt(v string) (attempt, most int) {
	if v == "" {
		return 1, 0
	}
	first, rest, _ := strings.Cut(v, ";")
	n, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || n < 1 || n > maxAttempt {
		return 1, 0
	}
	for param := range strings.SplitSeq(rest, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(param), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "max") {
			continue
		}
		if m, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && m >= n && m <= maxAttempt {
			most = m
		}
	}
	return n, most
}

// parseTimeout reads whole milliseconds, capped at limit.
func parseTimeout(v string, limit time.Duration) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(v), "-") {
		return limit, true // more digits than an int64 holds: capped, not ignored
	}
	if err != nil || ms < 0 {
		return 0, false
	}
	if ms > int64(limit/time.Millisecond) {
		return limit, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// pushbackWriter adds ShouldRetry: false to an overload response once a
// retry layer serving the request pushed back. Every method that may send
// the header goes through its WriteHeader. Handlers get it only through
// writer, which hides the methods the original writer lacks.
type pushbackWriter struct {
	http.ResponseWriter
	st    *inbound.State
	name  string
	wrote bool
}

func (w *pushbackWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 { // 1xx are interim
		w.wrote = true
		if w.st.PushedBack() && (code >= 500 || code == http.StatusTooManyRequests) {
			w.Header().Set(w.name, "false")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *pushbackWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps the original's io.ReaderFrom, which io.Copy uses: over
// HTTP/1.1 it sends an *os.File with sendfile.
func (w *pushbackWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

// Flush flushes the original writer (http.Flusher).
func (w *pushbackWriter) Flush() { w.FlushError() }

// FlushError flushes the original writer and returns its error, as
// http.ResponseController.Flush does: a write error once the client is
// gone.
func (w *pushbackWriter) FlushError() error {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (http.Hijacker, which WebSocket
// libraries assert): an upgrade is the handler's, and carries no pushback.
func (w *pushbackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.wrote = true
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// Push starts an HTTP/2 server push (http.Pusher); it sends no status.
func (w *pushbackWriter) Push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// Unwrap returns the original writer, for http.ResponseController. (An
// original that is no Flusher but flushes through its own Unwrap gets a
// ResponseController Flush this way, without the pushback header.)
func (w *pushbackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The parts writer assembles a handler's writer from, each backed by the
// one *pushbackWriter.
type (
	baseWriter interface {
		http.ResponseWriter
		Unwrap() http.ResponseWriter
	}
	flusher interface {
		http.Flusher
		FlushError() error // what ResponseController calls, for the error
	}
)

// writer returns w with exactly the optional interfaces in has (those of
// the original writer), so that next's type assertions, and io.Copy's and
// ResponseController's, answer as they would without Handler: a writer
// that claims Hijacker over HTTP/2 breaks WebSocket libraries, one that
// hides ReaderFrom loses sendfile.
func (w *pushbackWriter) writer(has wire.Optional) http.ResponseWriter {
	switch has {
	case wire.Flusher:
		return struct {
			baseWriter
			flusher
		}{w, w}
	case wire.Hijacker:
		return struct {
			baseWriter
			http.Hijacker
		}{w, w}
	case wire.Flusher | wire.Hijacker:
		return struct {
			baseWriter
			flusher
			http.Hijacker
		}{w, w, w}
	case wire.ReaderFrom:
		return struct {
			baseWriter
			io.ReaderFrom
		}{w, w}
	case wire.Flusher | wire.ReaderFrom:
		return struct {
			baseWriter
			flusher
			io.ReaderFrom
		}{w, w, w}
	case wire.Hijacker | wire.ReaderFrom:
		return struct {
			baseWriter
			http.Hijacker
			io.ReaderFrom
		}{w, w, w}
	case wire.Flusher | wire.Hijacker | wire.ReaderFrom: // HTTP/1.1
		return struct {
			baseWriter
			flusher
			http.Hijacker
			io.ReaderFrom
		}{w, w, w, w}
	case wire.Pusher:
		return struct {
			baseWriter
			http.Pusher
		}{w, w}
	case wire.Flusher | wire.Pusher: // HTTP/2
		return struct {
			baseWriter
			flusher
			http.Pusher
		}{w, w, w}
	case wire.Hijacker | wire.Pusher:
		return struct {
			baseWriter
			http.Hijacker
			http.Pusher
		}{w, w, w}
	case wire.Flusher | wire.Hijacker | wire.Pusher:
		return struct {
			baseWriter
			flusher
			http.Hijacker
			http.Pusher
		}{w, w, w, w}
	case wire.ReaderFrom | wire.Pusher:
		return struct {
			baseWriter
			io.ReaderFrom
			http.Pusher
		}{w, w, w}
	case wire.Flusher | wire.ReaderFrom | wire.Pusher:
		return struct {
			baseWriter
			flusher
			io.ReaderFrom
			http.Pusher
		}{w, w, w, w}
	case wire.Hijacker | wire.ReaderFrom | wire.Pusher:
		return struct {
			baseWriter
			http.Hijacker
			io.ReaderFrom
			http.Pusher
		}{w, w, w, w}
	case wire.Flusher | wire.Hijacker | wire.ReaderFrom | wire.Pusher:
		return struct {
			baseWriter
			flusher
			http.Hijacker
			io.ReaderFrom
			http.Pusher
		}{w, w, w, w, w}
	default: // none of them
		return struct{ baseWriter }{w}
	}
}
