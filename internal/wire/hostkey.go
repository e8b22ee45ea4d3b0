package wire

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// HostKey is u's host as net/http dials it (an internationalised name
// mapped and in punycode, as net/http's idna.Lookup does), in lower case,
// without the scheme's default port: the key of the per-host state of the
// breaker, the throttle and pacing, so that "API.example.com",
// "api.example.com" and "api.example.com:443" (for https) are one host,
// and "İstanbul.example" is not "istanbul.example". A host in lower-case
// ASCII is not copied.
func HostKey(u *url.URL) string {
	h := u.Host
	var wide, upper bool // neither: the usual host, one pass and no copy
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c >= 0x80:
			wide = true
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	switch {
	case wide:
		host, port := h, ""
		if j := strings.LastIndexByte(h, ':'); j >= 0 {
			host, port = h[:j], h[j:]
		}
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			host = a
		}
		h = strings.ToLower(host) + port
	case upper:
		h = strings.ToLower(h)
	}
	switch {
	case u.Scheme == "https" && strings.HasSuffix(h, ":443"):
		h = h[:len(h)-len(":443")]
	case u.Scheme == "http" && strings.HasSuffix(h, ":80"):
		h = h[:len(h)-len(":80")]
	}
	return h
}

// ServerAddress is req's server.address and server.port as the semantic
// conventions have them, and as every span, event and metric of the
// module reports them: from the Host header when the request sets one
// (the conventions' rule), else from the URL; the host alone (an IPv6
// address without its brackets), and the port always, the scheme's
// default when there is none.
func ServerAddress(req *http.Request) (string, int) {
	u := req.URL
	if req.Host != "" && req.Host != u.Host {
		u = &url.URL{Host: req.Host, Scheme: req.URL.Scheme} // on the stack
	}
	host, p := u.Hostname(), u.Port()
	if p == "" {
		if req.URL.Scheme == "https" {
			return host, 443
		}
		return host, 80
	}
	port, _ := strconv.Atoi(p)
	return host, port
}
