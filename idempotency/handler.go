package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// the handler's longest run.
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
}

type keyCtx struct{}

// KeyOf returns the idempotency key of the request ctx belongs to, inside
// Handler: make it part of the handler's own write (a unique column in
// the same transaction), so that a crash between the effect and the stored
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
		key, present := parseKey(r.Header.Get(protocol.IdempotencyKey))
		if !present { // the older name many APIs use
			key, present = parseKey(r.Header.Get(protocol.XIdempotencyKey))
		}
		switch {
		case !present && cfg.Required:
			problem(w, http.StatusBadRequest, "Idempotency-Key is missing", "This operation requires an Idempotency-Key header.")
			return
		case !present:
			next.ServeHTTP(w, r)
			return
		case len(key) > cfg.MaxKeyLength:
			problem(w, http.StatusBadRequest, "Idempotency-Key is too long", fmt.Sprintf("A key is at most %d bytes.", cfg.MaxKeyLength))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, cfg.MaxRequestBody+1))
		if err != nil {
			problem(w, http.StatusBadRequest, "The request body could not be read", err.Error())
			return
		}
		if int64(len(body)) > cfg.MaxRequestBody {
			problem(w, http.StatusRequestEntityTooLarge, "The request body is too large", fmt.Sprintf("A request with an Idempotency-Key has at most %d bytes of body.", cfg.MaxRequestBody))
			return
		}
		fp := fingerprint(r, body)
		rec, err := cfg.Store.Begin(r.Context(), key, fp, cfg.Lease)
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
			if cfg.OnStoreError != nil {
				cfg.OnStoreError(r, err) // the internals reach the server's own hook, never the client
			}
			problem(w, http.StatusServiceUnavailable, "The idempotency store failed", "Retry later.")
			return
		case rec != nil:
			replay(w, rec)
			return
		}

		r.Body = io.NopCloser(bytes.NewReader(body))
		rw := &recorder{ResponseWriter: w, limit: cfg.MaxStoredBody, header: http.Header{}}
		completed := false
		defer func() {
			if !completed {
				// The handler panicked: no response to keep, so a retry
				// may run it again.
				cfg.Store.Release(context.WithoutCancel(r.Context()), key)
			}
		}()
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), keyCtx{}, key)))
		completed = true
		if !rw.wrote {
			rw.WriteHeader(http.StatusOK)
		}
		done := rw.record()
		done.Fingerprint = fp
		// An error leaves no record (the response is sent already): a
		// retry then runs the handler again, as after a crash.
		cfg.Store.Complete(context.WithoutCancel(r.Context()), key, done, cfg.Keep)
	})
}

// parseKey reads a key: an sf-string ("...", as the draft has it) or,
// as clients often send, a bare token.
func parseKey(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if s, err := strconv.Unquote(v); err == nil {
			v = s
		} else {
			v = v[1 : len(v)-1]
		}
	}
	return v, v != ""
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
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}

// recorder passes the response through and keeps a copy for replays.
type recorder struct {
	http.ResponseWriter
	limit  int
	status int
	header http.Header
	body   bytes.Buffer
	over   bool
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if r.wrote || code < 200 {
		r.ResponseWriter.WriteHeader(code)
		return
	}
	r.wrote, r.status = true, code
	r.header = r.ResponseWriter.Header().Clone()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if r.body.Len()+len(p) > r.limit {
			r.over = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Flush flushes the original writer if it can.
func (r *recorder) Flush() { http.NewResponseController(r.ResponseWriter).Flush() }

// Unwrap returns the original writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) record() *Record {
	h := r.header.Clone()
	h.Del("Date")
	rec := &Record{Status: r.status, Header: h, BodyKept: !r.over}
	if !r.over {
		rec.Body = bytes.Clone(r.body.Bytes())
	}
	return rec
}
