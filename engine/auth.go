package engine

import "net/http"

// causeAuth is the Decision.Cause of a resend after RefreshAuth: it is
// sent at once, outside the backoff and the budget.
const causeAuth = "auth"

// refreshAuth runs Config.RefreshAuth for a 401 answering attempt n, once
// per operation and only while an attempt is left: true when the
// credentials were refreshed and the request is to be sent again at once.
// A refresh that does not help is not retried.
func (o *httpOp) refreshAuth(n int, resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized || o.e.refreshAuth == nil || o.refreshed || n >= o.e.p.MaxAttempts {
		return false
	}
	o.refreshed = true
	return o.e.refreshAuth(&o.rare.outside, resp) == nil // e.detach: o.rare made in roundTrip
}
