package wire

import (
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// HostKey is u's host as net/http sends it (an internationalised name in
// punycode), in lower case, without the scheme's default port: the key of
// the per-host state of the breaker, the throttle and pacing, so that
// "API.example.com", "api.example.com" and "api.example.com:443" (for
// https) are one host. A host in lower-case ASCII is not copied.
func HostKey(u *url.URL) string {
	h := u.Host
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			h = strings.ToLower(h) // first: "Ü" and "ü" have one punycode only in lower case
			if p, err := httpguts.PunycodeHostPort(h); err == nil {
				h = p
			}
			break
		}
	}
	switch {
	case u.Scheme == "https" && strings.HasSuffix(h, ":443"):
		h = h[:len(h)-len(":443")]
	case u.Scheme == "http" && strings.HasSuffix(h, ":80"):
		h = h[:len(h)-len(":80")]
	}
	return h
}
