package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"

	"golang.org/x/net/http2"
)

// ErrorKind is the family of a transport error, found with errors.Is and
// errors.As, never by reading messages.
type ErrorKind uint8

const (
	ErrorOther         ErrorKind = iota // none of the below
	ErrorCanceled                       // context.Canceled
	ErrorTimeout                        // a net.Error whose Timeout() is true, or context.DeadlineExceeded
	ErrorRefused                        // ECONNREFUSED
	ErrorReset                          // ECONNRESET, ECONNABORTED, EPIPE, net.ErrClosed in flight
	ErrorEOF                            // the connection ended before a response (io.EOF, io.ErrUnexpectedEOF, net/http's "server closed idle connection")
	ErrorTLS                            // a TLS handshake failure other than certificate verification
	ErrorCertificate                    // certificate verification failed: retrying cannot help
	ErrorDNS                            // a DNS lookup failed temporarily
	ErrorDNSNotFound                    // the host does not exist: retrying cannot help
	ErrorRefusedStream                  // HTTP/2 RST_STREAM(REFUSED_STREAM): the server did not process it
	ErrorGoAway                         // HTTP/2 GOAWAY(NO_ERROR): a graceful shutdown
	ErrorProtocol                       // another HTTP/2 stream or connection error
	// ErrorStreamReset is an HTTP/2 RST_STREAM(INTERNAL_ERROR or CANCEL):
	// what a reverse proxy sends when its upstream fails. The request was
	// sent and got no response, as when an HTTP/1.1 connection is reset,
	// so an idempotent request may be retried (RFC 9110 §9.2.2).
	ErrorStreamReset
)

var kindNames = [...]string{"other", "canceled", "timeout", "refused", "reset", "eof", "tls", "certificate", "dns", "dns-not-found", "refused-stream", "goaway", "protocol", "stream-reset"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Transient reports whether an error of this kind may go away on its own:
// timeout, refused, reset, EOF, TLS handshake, temporary DNS failures, the
// HTTP/2 protocol NACKs and an HTTP/2 stream reset by a failing upstream.
func (k ErrorKind) Transient() bool {
	switch k {
	case ErrorTimeout, ErrorRefused, ErrorReset, ErrorEOF, ErrorTLS, ErrorDNS, ErrorRefusedStream, ErrorGoAway, ErrorStreamReset:
		return true
	}
	return false
}

// ProtocolNack reports whether the kind is one of the HTTP/2 signals that
// the server did not process the request (RFC 9113 §8.7): REFUSED_STREAM
// and a graceful GOAWAY. reqwest's default classifier retries these only.
func (k ErrorKind) ProtocolNack() bool { return k == ErrorRefusedStream || k == ErrorGoAway }

// cause is the Decision.Cause for a retried error of this kind.
func (k ErrorKind) cause() string {
	switch k {
	case ErrorTimeout:
		return "timeout"
	case ErrorRefused, ErrorReset, ErrorEOF, ErrorTLS, ErrorDNS, ErrorStreamReset:
		return "connection"
	case ErrorRefusedStream, ErrorGoAway, ErrorProtocol:
		return "protocol"
	}
	return "error"
}

// KindOf returns the family of err; nil is ErrorOther.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ErrorOther
	}
	if errors.Is(err, context.Canceled) {
		return ErrorCanceled
	}
	// errors.AsType, not errors.As: no allocation on any path.
	if is[*tls.CertificateVerificationError](err) || is[x509.UnknownAuthorityError](err) ||
		is[x509.HostnameError](err) || is[x509.CertificateInvalidError](err) {
		return ErrorCertificate
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		if dns.IsNotFound {
			return ErrorDNSNotFound
		}
		if dns.IsTimeout {
			return ErrorTimeout
		}
		return ErrorDNS
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrorTimeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return ErrorTimeout
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ErrorReset
	case errors.Is(err, net.ErrClosed):
		// net/http reads and writes a connection on two goroutines: when
		// the reader meets a reset first, it closes the connection, and
		// the writer's "use of closed network connection" is what comes
		// back. The same reset, the same kind, whichever side saw it.
		return ErrorReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), serverClosedIdle(err):
		return ErrorEOF
	}
	if stream, ok := errors.AsType[http2.StreamError](err); ok {
		return streamKind(stream.Code)
	}
	//lint:ignore SA1019 golang.org/x/net/http2's Transport, which users still configure, returns it
	if goAway, ok := errors.AsType[http2.GoAwayError](err); ok {
		if goAway.ErrCode == http2.ErrCodeNo {
			return ErrorGoAway
		}
		return ErrorProtocol
	}
	if is[http2.ConnectionError](err) {
		return ErrorProtocol
	}
	if k, ok := bundledHTTP2(err); ok {
		return k
	}
	if is[tls.AlertError](err) || is[tls.RecordHeaderError](err) {
		return ErrorTLS
	}
	return ErrorOther
}

// serverClosedIdle reports whether err's chain holds net/http's "server
// closed idle connection": the server's FIN (an idle timeout: nginx's
// keepalive_timeout, a load balancer's) reached a pooled connection just
// as a request took it. It is the io.EOF of the connection's read, met
// before the request was handed to the connection; net/http resends it
// only for a replayable request (GET, HEAD, a keyed one) and returns it
// otherwise. The value is unexported and returned undecorated, an
// errors.New of net/http's: no type or sentinel can name it, so its exact
// text does, on that type alone.
func serverClosedIdle(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if reflect.TypeOf(e).String() == "*errors.errorString" && e.Error() == "http: server closed idle connection" {
			return true
		}
	}
	return false
}

// bundledHTTP2 classifies the HTTP/2 errors of net/http's own HTTP/2
// implementation, which http.Transport uses unless told otherwise: in Go
// 1.26 unexported copies of x/net's types (h2_bundle.go's
// http2StreamError, http2GoAwayError), from Go 1.27 the types of the
// internal package net/http/internal/http2 (StreamError, GoAwayError),
// which x/net's transport also returns there. errors.As cannot name
// either, so it recognises them by package, type name and the error-code
// field, never by message, along err's Unwrap chain.
func bundledHTTP2(err error) (ErrorKind, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		t := reflect.TypeOf(e)
		if t.Kind() != reflect.Struct || t.NumField() < 2 {
			continue
		}
		var typeName string
		switch t.PkgPath() {
		case "net/http": // Go 1.26
			typeName = strings.TrimPrefix(t.Name(), "http2")
		case "net/http/internal/http2": // Go 1.27
			typeName = t.Name()
		default:
			continue
		}
		code, name := reflect.ValueOf(e).Field(1), t.Field(1).Name
		if code.Kind() != reflect.Uint32 {
			continue
		}
		switch {
		case typeName == "StreamError" && name == "Code":
			return streamKind(http2.ErrCode(code.Uint())), true
		case typeName == "GoAwayError" && name == "ErrCode":
			if http2.ErrCode(code.Uint()) == http2.ErrCodeNo {
				return ErrorGoAway, true
			}
			return ErrorProtocol, true
		}
	}
	return 0, false
}

// streamKind is the kind of an HTTP/2 stream reset with code c.
func streamKind(c http2.ErrCode) ErrorKind {
	switch c {
	case http2.ErrCodeRefusedStream:
		return ErrorRefusedStream
	case http2.ErrCodeInternal, http2.ErrCodeCancel:
		return ErrorStreamReset
	}
	return ErrorProtocol // a fault of the protocol's own: sending it again would meet it again
}

// is reports whether err's tree holds an E.
func is[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}
