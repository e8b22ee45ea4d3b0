package engine

import (
	"crypto/rand"
	"fmt"
	"net/http"

	"github.com/retrystack/retrystack/internal/operation"
	"github.com/retrystack/retrystack/internal/protocol"
)

// withKey is req with an Idempotency-Key of the operation's: one copy of
// the request and its header per operation, which every attempt starts
// from.
func withKey(req *http.Request, op *operation.Operation) *http.Request {
	key := op.IdempotencyKey(newKey) // the same on every redirect hop
	r := req.Clone(req.Context())
	r.Header.Set(protocol.IdempotencyKey, `"`+key+`"`) // an sf-string, as draft-ietf-httpapi-idempotency-key-header has it
	return r
}

// newKey returns a random (version 4) UUID.
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// hasKey reports whether req carries an Idempotency-Key (its own, or the
// one withKey added).
func hasKey(req *http.Request) bool {
	return req.Header.Get(protocol.IdempotencyKey) != "" || req.Header.Get(protocol.XIdempotencyKey) != ""
}
