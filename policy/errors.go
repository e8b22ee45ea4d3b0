package policy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// ErrorKind is the family of a transport error, found with errors.Is and
// errors.As, never by reading messages.
type ErrorKind uint8

const (
	ErrorOther       ErrorKind = iota // none of the below
	ErrorCanceled                     // context.Canceled
	ErrorTimeout                      // a net.Error whose Timeout() is true, or context.DeadlineExceeded
	ErrorRefused                      // ECONNREFUSED
	ErrorReset                        // ECONNRESET, ECONNABORTED, EPIPE
	ErrorEOF                          // the connection ended before a response (io.EOF, io.ErrUnexpectedEOF)
	ErrorTLS                          // a TLS handshake failure other than certificate verification
	ErrorCertificate                  // certificate verification failed: retrying cannot help
	ErrorDNS                          // a DNS lookup failed temporarily
	ErrorDNSNotFound                  // the host does not exist: retrying cannot help
)

var kindNames = [...]string{"other", "canceled", "timeout", "refused", "reset", "eof", "tls", "certificate", "dns", "dns-not-found"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Transient reports whether an error of this kind may go away on its own:
// timeout, refused, reset, EOF, TLS handshake and temporary DNS failures.
func (k ErrorKind) Transient() bool {
	switch k {
	case ErrorTimeout, ErrorRefused, ErrorReset, ErrorEOF, ErrorTLS, ErrorDNS:
		return true
	}
	return false
}

// cause is the Decision.Cause for a retried error of this kind.
func (k ErrorKind) cause() string {
	switch k {
	case ErrorTimeout:
		return "timeout"
	case ErrorRefused, ErrorReset, ErrorEOF, ErrorTLS, ErrorDNS:
		return "connection"
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
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &cert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return ErrorCertificate
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
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
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrorTimeout
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrorRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ErrorReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrorEOF
	}
	var alert tls.AlertError
	var record tls.RecordHeaderError
	if errors.As(err, &alert) || errors.As(err, &record) {
		return ErrorTLS
	}
	return ErrorOther
}
