package engine

import "net/http"

// cookies shows resp, which the caller will not get, to the cookie layer
// above, or keeps its Set-Cookie lines for the final response; it names
// the cookies now lost.
func (o *httpOp) cookies(resp *http.Response) (lost []string) {
	if obs := o.operation.Discard(); obs != nil {
		lost = obs(resp)
	} else if sc := resp.Header["Set-Cookie"]; len(sc) > 0 {
		// No cookie layer above: the caller's http.Client (its Jar)
		// stores what the final response carries (RFC 6265: a user agent
		// stores the cookies of every response it receives).
		host := hostOf(resp)
		x := o.rareState()
		for _, line := range sc {
			x.carried = append(x.carried, carriedCookie{line: line, host: host})
		}
	}
	return lost
}

// uncarried names the cookies of the discarded responses that no final
// response will carry.
func (o *httpOp) uncarried() []string {
	x := o.rare
	if x == nil {
		return nil
	}
	var names []string
	for _, c := range x.carried {
		if ck, err := http.ParseSetCookie(c.line); err == nil {
			names = append(names, ck.Name)
		}
	}
	x.carried = nil
	return names
}

// A carriedCookie is a Set-Cookie line of a discarded response and the
// host that sent it.
type carriedCookie struct{ line, host string }

// hostOf is the host resp answers for.
func hostOf(resp *http.Response) string {
	if resp.Request != nil && resp.Request.URL != nil {
		return resp.Request.URL.Host
	}
	return ""
}

// carry puts the Set-Cookie lines of the discarded responses on resp, the
// final one, for the caller's http.Client (its Jar).
func (o *httpOp) carry(resp *http.Response) {
	x := o.rare
	if x == nil || len(x.carried) == 0 {
		return
	}
	// The discarded responses' cookies first: the final response's own
	// come after them, and win. Only those of the final response's
	// host: the Client's jar stores them for its URL (a Prepare may
	// have sent an attempt elsewhere); the others are named lost. The
	// header is copied: a layer below may share its map.
	host := hostOf(resp)
	var lines, rest []carriedCookie
	for _, c := range x.carried {
		if c.host == host {
			lines = append(lines, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(lines) > 0 {
		h := resp.Header.Clone()
		if h == nil {
			h = make(http.Header)
		}
		sc := make([]string, 0, len(lines)+len(h["Set-Cookie"]))
		for _, c := range lines {
			sc = append(sc, c.line)
		}
		h["Set-Cookie"] = append(sc, h["Set-Cookie"]...)
		resp.Header = h
	}
	x.carried = rest
}
