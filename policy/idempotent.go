package policy

import (
	"net/http"
	"strings"

	"github.com/retrystack/retrystack/internal/protocol"
)

// idempotentMethod reports whether method is idempotent per RFC 9110 §9.2.2:
// GET, HEAD, OPTIONS, TRACE, PUT and DELETE.
func idempotentMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete, "":
		return true // "" means GET in net/http
	}
	return false
}

// Idempotent reports whether req may be repeated without changing its
// effect: an idempotent method, or an Idempotency-Key / X-Idempotency-Key
// header that lets the server deduplicate.
func Idempotent(req *http.Request) bool {
	return idempotentMethod(req.Method) || hasIdempotencyKey(req.Header)
}

func hasIdempotencyKey(h http.Header) bool {
	// Direct map reads: canonical keys, no allocation. An empty value is
	// no key: a server cannot deduplicate by it.
	return nonEmpty(h[protocol.IdempotencyKey]) || nonEmpty(h[protocol.XIdempotencyKey])
}

func nonEmpty(vs []string) bool {
	for _, v := range vs {
		if strings.TrimSpace(strings.Trim(v, `" `)) != "" {
			return true
		}
	}
	return false
}
