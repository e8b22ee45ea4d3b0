// Package storekit is what the idempotency stores of their own modules
// (stores/redis, stores/postgres) share: a claim's owner token and a
// record's header kept byte for byte.
package storekit

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// Token returns a random token that names a claim's owner.
func Token() string {
	var t [16]byte
	rand.Read(t[:])
	return hex.EncodeToString(t[:])
}

// EncodeHeader keeps a header's values as bytes, for JSON: JSON strings
// would turn bytes that are not UTF-8 (a Latin-1 filename) into U+FFFD.
func EncodeHeader(h http.Header) map[string][][]byte {
	enc := make(map[string][][]byte, len(h))
	for k, vs := range h {
		for _, v := range vs {
			enc[k] = append(enc[k], []byte(v))
		}
	}
	return enc
}

// DecodeHeader is EncodeHeader's inverse.
func DecodeHeader(enc map[string][][]byte) http.Header {
	h := make(http.Header, len(enc))
	for k, vs := range enc {
		for _, v := range vs {
			h[k] = append(h[k], string(v))
		}
	}
	return h
}
