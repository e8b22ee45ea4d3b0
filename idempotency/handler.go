package idempotency

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/internal/protocol"
)

// Config configures Handler. The zero value applies the protocol to POST
// and PATCH requests that carry a key, in memory.
type Config struct {
	// Store keeps the keys; nil: a NewMemoryStore(0, nil) of this handler.
	Store Store
	// Methods are those the protocol applies to; nil: POST and PATCH.
	Methods []string
	// Required answers 400 to a request of those methods without a key.
	Required bool
	// Keep is how long a key's response is kept, and replayed: 0 means
	// 24 h. Publish it to clients (the draft asks servers to).
	Keep time.Duration
	// Lease is how long a first request holds its key before a duplicate
	// may run (its instance crashed): 0 means 1 min. Make it longer than
	// the handler's longest run. It is also the handler's deadline: the
	// handler's context ends with the lease, not when the client goes
	// away (the client's retry comes back for the answer).
	Lease time.Duration
	// MaxKeyLength bounds a key: longer ones get 400. 0 means 255.
	MaxKeyLength int
	// MaxRequestBody bounds the body read to fingerprint a request: larger
	// ones get 413 before the handler runs. 0 means 1 MiB.
	MaxRequestBody int64
	// MaxStoredBody bounds the response body kept for replays: a larger
	// one is sent in full, and replays get its status and headers with no
	// body (Idempotent-Replayed: body-not-kept). 0 means 1 MiB.
	MaxStoredBody int
	// OnStoreError is told each error of the Store (a Redis address, a
	// connection refused): the 503 the client gets says only that the
	// store failed, never how. nil: none.
	OnStoreError func(r *http.Request, err error)

	// Principal, when set, names the principal a request is made for (an
	// account, the id of an API key; never a secret itself): keys are then
	// scoped to it, so that the same key from another principal is
	// another key, and never gets this principal's stored answer (the
	// draft's security considerations). nil: one scope for every client,
	// which is safe only when no two clients can know each other's keys.
	Principal func(r *http.Request) string
}

type keyCtx struct{}

// KeyOf returns the idempotency key of the request ctx belongs to, inside
// Handler, scoped to its principal when Config.Principal is set: make it
// part of the handler's own write (a unique column in the same
// transaction), so that a crash between the effect and the stored
// response cannot duplicate the effect.
func KeyOf(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx{}).(string)
	return k, ok
}

// Handler serves next under the idempotency protocol (see the package
// documentation).
func Handler(next http.Handler, cfg Config) http.Handler {
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore(0, nil)
	}
	if cfg.Methods == nil {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24 * time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.MaxKeyLength <= 0 {
		cfg.MaxKeyLength = 255
	}
	if cfg.MaxRequestBody <= 0 {
		cfg.MaxRequestBody = 1 << 20
	}
	if cfg.MaxStoredBody <= 0 {
		cfg.MaxStoredBody = 1 << 20
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(cfg.Methods, r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		field := r.Header.Values(protocol.IdempotencyKey)
		if len(field) == 0 { // the older name many APIs use
			field = r.Header.Values(protocol.XIdempotencyKey)
		}
		key, ok := parseKey(field)
		switch {
		case len(field) == 0 && cfg.Required:
			problem(w, http.StatusBadRequest, "Idempotency-Key is missing", "This operation requires an Idempotency-Key header.")
			return
		case len(field) == 0:
			next.ServeHTTP(w, r)
			return
		case !ok:
			problem(w, http.StatusBadRequest, "Idempotency-Key is malformed", "A key is one non-empty string of printable ASCII, quoted (\"...\") or not.")
			return
		case len(key) > cfg.MaxKeyLength:
			problem(w, http.StatusBadRequest, "Idempotency-Key is too long", fmt.Sprintf("A key is at most %d bytes.", cfg.MaxKeyLength))
			return
		}
		if cfg.Principal != nil {
			key = scoped(cfg.Principal(r), key)
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, cfg.MaxRequestBody+1))
		if err != nil {
			problem(w, http.StatusBadRequest, "The request body could not be read", "")
			return
		}
		if int64(len(body)) > cfg.MaxRequestBody {
			problem(w, http.StatusRequestEntityTooLarge, "The request body is too large", fmt.Sprintf("A request with an Idempotency-Key has at most %d bytes of body.", cfg.MaxRequestBody))
			return
		}
		fp := fingerprint(r, body)
		// Every refusal before the handler runs leaves no record: a retry
		// of it runs the handler.
		claim, rec, err := cfg.Store.Begin(r.Context(), key, fp, cfg.Lease)
		switch {
		case errors.Is(err, ErrInFlight):
			problem(w, http.StatusConflict, "A request with this Idempotency-Key is being processed", "Retry once it has completed.")
			return
		case errors.Is(err, ErrMismatch):
			problem(w, http.StatusUnprocessableEntity, "The Idempotency-Key was used for another request", "Send a new key for a new request.")
			return
		case errors.Is(err, ErrFull):
			problem(w, http.StatusServiceUnavailable, "The idempotency store is full", "Retry later.")
			return
		case err != nil:
			storeFailed(w, r, cfg, err)
			return
		case rec != nil:
			replay(w, rec)
			return
		}

		r.Body = io.NopCloser(bytes.NewReader(body))
		rw := &recorder{w: w, limit: cfg.MaxStoredBody, header: http.Header{}}
		if c, ok := claim.(interface{ Commits() bool }); ok && c.Commits() {
			rw.hold = true // an answer sent before a commit that fails would tell of a write that never happened
		}
		completed := false
		defer func() {
			if !completed {
				// The handler panicked: no response to keep, so a retry
				// may run it again.
				claim.Release(context.WithoutCancel(r.Context()))
			}
		}()
		// The handler runs to its end even when the client goes away (an
		// attempt timeout): the client's retry comes back for the answer,
		// which must be the write's, not a cancellation's. Its lease bounds
		// it instead: past it, a duplicate may run.
		ctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(r.Context()), keyCtx{}, key), cfg.Lease)
		defer cancel()
		next.ServeHTTP(rw, r.WithContext(claim.Context(ctx)))
		completed = true
		if rw.hijacked {
			// The handler took the connection: there is no answer to keep
			// or replay, so a retry runs it again.
			claim.Release(context.WithoutCancel(r.Context()))
			return
		}
		if !rw.wrote {
			rw.WriteHeader(http.StatusOK)
		}
		// The answer is stored before it is sent: a retry that follows it
		// finds it, even when this process dies in between.
		err = claim.Complete(context.WithoutCancel(r.Context()), rw.record(), cfg.Keep)
		switch {
		case errors.Is(err, ErrNotCommitted) && !rw.sent:
			storeFailed(w, r, cfg, err) // nothing happened: a retry runs the handler again
			return
		case err != nil:
			// The effect happened and the store has not kept its answer
			// (ErrInFlight: the lease ended while the handler ran, and
			// another request holds the key): the handler's answer all
			// the same.
			if cfg.OnStoreError != nil {
				cfg.OnStoreError(r, err)
			}
		}
		rw.send()
	})
}

// storeFailed answers 503 for a store that failed, its internals told only
// to the server's own hook.
func storeFailed(w http.ResponseWriter, r *http.Request, cfg Config, err error) {
	if cfg.OnStoreError != nil {
		cfg.OnStoreError(r, err)
	}
	problem(w, http.StatusServiceUnavailable, "The idempotency store failed", "Retry later.")
}

// scoped is key within principal's scope: a digest of the principal, so
// that no choice of principal or key makes two scoped keys meet.
func scoped(principal, key string) string {
	d := sha256.Sum256([]byte(principal))
	return hex.EncodeToString(d[:16]) + "/" + key
}

// parseKey reads a key from the field's lines: one sf-string (RFC 8941,
// as the draft has it) or, as clients often send, one bare run of visible
// ASCII without quotes, backslashes, commas or semicolons. Anything else
// (several lines or items, an empty string, control characters,
// parameters) is malformed.
func parseKey(field []string) (string, bool) {
	if len(field) != 1 {
		return "", false
	}
	v := strings.Trim(field[0], " \t")
	if v == "" {
		return "", false
	}
	if v[0] != '"' {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' || c == ',' || c == ';' {
				return "", false
			}
		}
		return v, true
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v) && (v[i+1] == '"' || v[i+1] == '\\'):
			b.WriteByte(v[i+1])
			i++
		case c == '"':
			return b.String(), i == len(v)-1 && b.Len() > 0
		case c < ' ' || c > '~' || c == '\\':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}

// fingerprint binds a key to its request: method, target and body.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.RequestURI())
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func replay(w http.ResponseWriter, rec *Record) {
	for k, v := range rec.Header {
		w.Header()[k] = v
	}
	if rec.BodyKept {
		w.Header().Set(protocol.Replayed, "true")
		w.Header().Set("Content-Length", strconv.Itoa(len(rec.Body)))
		w.WriteHeader(rec.Status)
		w.Write(rec.Body)
		return
	}
	w.Header().Set(protocol.Replayed, "body-not-kept")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(rec.Status)
}

// problem writes an RFC 9457 problem detail.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	p := map[string]any{"type": "about:blank", "title": title, "status": status}
	if detail != "" {
		p["detail"] = detail
	}
	json.NewEncoder(w).Encode(p)
}

// recorder holds the handler's answer until it is stored, and keeps a
// copy for replays. An answer larger than the limit, or one the handler
// flushes, goes out as it is written (a stream cannot wait), unless hold
// is set (a transactional store: nothing goes out before the commit); an
// answer larger than the limit is kept without its body.
type recorder struct {
	w        http.ResponseWriter
	limit    int
	hold     bool        // hold the whole answer until it is stored
	header   http.Header // the handler's, until the answer goes out
	status   int
	body     bytes.Buffer
	wrote    bool // the handler chose its status
	sent     bool // the answer went out: the writer is w's own from then on
	over     bool // the body outgrew the limit: not kept
	hijacked bool // the handler took the connection
	done     bool // the handler returned
}

func (r *recorder) Header() http.Header {
	if r.sent {
		return r.w.Header()
	}
	return r.header
}

func (r *recorder) WriteHeader(code int) {
	switch {
	case r.sent:
		r.w.WriteHeader(code) // net/http's own warnings for a late call
	case code < 200: // informational: it goes out at once, with the header as it is now
		maps.Copy(r.w.Header(), r.header)
		r.w.WriteHeader(code)
		clear(r.w.Header()) // the final answer sends the handler's header as it will be then
	case !r.wrote:
		r.wrote, r.status = true, code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if r.sent {
		if !r.over {
			if r.body.Len()+len(p) > r.limit {
				r.over, r.body = true, bytes.Buffer{}
			} else {
				r.body.Write(p) // for the record, flushed or not
			}
		}
		return r.w.Write(p)
	}
	r.body.Write(p)
	if !r.over && r.body.Len() > r.limit {
		r.over = true
		if !r.hold {
			r.stream()
			r.body = bytes.Buffer{}
		}
	}
	return len(p), nil
}

// stream sends what the handler wrote so far, and what it writes next as
// it comes.
func (r *recorder) stream() {
	if r.sent {
		return
	}
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	r.sent = true
	if r.done {
		// The whole answer is known: trailers the handler set go as
		// headers, as they are kept for replays.
		untrail(r.header)
	}
	maps.Copy(r.w.Header(), r.header)
	r.w.WriteHeader(r.status)
	if r.body.Len() > 0 {
		r.w.Write(r.body.Bytes())
	}
}

// send sends the answer once it is stored; a streamed one is out already.
func (r *recorder) send() {
	r.done = true
	r.stream()
}

// Flush sends the answer so far: a handler that flushes streams, unless
// the answer is held until its commit.
func (r *recorder) Flush() {
	if r.hold {
		return
	}
	r.stream()
	http.NewResponseController(r.w).Flush()
}

// Hijack hands the connection to the handler, which then owns the
// exchange: nothing is stored for it.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(r.w).Hijack()
	if err == nil {
		r.hijacked = true
	}
	return conn, brw, err
}

// Unwrap returns the original writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// record is the answer as replays give it: its trailers as headers (the
// body is whole), without Date.
func (r *recorder) record() *Record {
	h := r.header.Clone()
	if r.sent {
		// Streamed: trailers set since are in the writer's header.
		for k, v := range r.w.Header() {
			if _, ok := h[k]; !ok {
				h[k] = v
			}
		}
	}
	untrail(h)
	h.Del("Date")
	rec := &Record{Status: r.status, Header: h, BodyKept: !r.over}
	if !r.over {
		rec.Body = bytes.Clone(r.body.Bytes())
	}
	return rec
}

// untrail makes h's trailers (declared in Trailer, or named with
// http.TrailerPrefix) plain fields, and drops the declaration: for an
// answer whose body is whole before its header goes out.
func untrail(h http.Header) {
	for k, v := range h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			delete(h, k)
			h[http.CanonicalHeaderKey(name)] = v
		}
	}
	h.Del("Trailer")
}
