package wire

import (
	"io"
	"net/http"
	"strings"
)

// Optional is a set of the optional interfaces of a ResponseWriter that a
// wrapper must keep exactly: one it drops disables a feature, one it adds
// lies about the connection (a Hijacker over HTTP/2).
type Optional uint8

// The interfaces, as bits of an Optional.
const (
	Flusher Optional = 1 << iota
	Hijacker
	ReaderFrom
	Pusher
)

// OptionalOf returns which of them w implements.
func OptionalOf(w http.ResponseWriter) Optional {
	var has Optional
	if _, ok := w.(http.Flusher); ok {
		has |= Flusher
	}
	if _, ok := w.(http.Hijacker); ok {
		has |= Hijacker
	}
	if _, ok := w.(io.ReaderFrom); ok {
		has |= ReaderFrom
	}
	if _, ok := w.(http.Pusher); ok {
		has |= Pusher
	}
	return has
}

// String names the interfaces in o, e.g. "{http.Flusher, http.Pusher}".
func (o Optional) String() string {
	var names []string
	for i, name := range []string{"http.Flusher", "http.Hijacker", "io.ReaderFrom", "http.Pusher"} {
		if o&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none of http.Flusher, http.Hijacker, io.ReaderFrom, http.Pusher"
	}
	return "{" + strings.Join(names, ", ") + "}"
}
