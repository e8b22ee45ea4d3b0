package policy

import (
	"net/http"
	"strings"
)

// Scope limits which requests a policy may retry. The zero value covers
// every request.
type Scope struct {
	// Hosts are the request hosts (without port, compared case-blind)
	// that may be retried; empty means any host.
	Hosts []string
	// Match, when set, must also accept the request.
	Match func(*http.Request) bool
	// FromSecondRetry checks the scope only from the second retry on,
	// reproducing reqwest 0.13.5, which resends an out-of-scope request
	// once (the pitfall scope-leak). By default the scope is checked
	// before the first retry.
	FromSecondRetry bool
}

// Covers reports whether req is in scope.
func (s Scope) Covers(req *http.Request) bool {
	if len(s.Hosts) > 0 {
		host := req.URL.Hostname()
		found := false
		for _, h := range s.Hosts {
			if strings.EqualFold(h, host) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return s.Match == nil || s.Match(req)
}
