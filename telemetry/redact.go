package telemetry

import (
	"net/url"
	"strings"
)

// signatureParams are the query parameters whose values url.full never
// carries: the semantic conventions' list since v1.42 (X-Amz-Signature,
// X-Amz-Credential, X-Amz-Security-Token, sig, X-Goog-Signature: AWS SigV4,
// Azure SAS and Google signed URLs), and the older list's AWSAccessKeyId
// and Signature, because SigV2 presigned URLs are still in use. The one
// list, for both spans.
var signatureParams = map[string]bool{
	"X-Amz-Signature": true, "X-Amz-Credential": true, "X-Amz-Security-Token": true,
	"sig": true, "X-Goog-Signature": true,
	"AWSAccessKeyId": true, "Signature": true,
}

// redactURL returns u as url.full should record it: userinfo becomes
// REDACTED:REDACTED and the values of signature query parameters become
// REDACTED; everything else is kept as it was.
func redactURL(u *url.URL) string {
	if u.User == nil && !hasSignature(u.RawQuery) {
		return u.String()
	}
	c := *u
	if c.User != nil {
		c.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if c.RawQuery != "" {
		parts := strings.Split(c.RawQuery, "&")
		for i, p := range parts {
			k, _, ok := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); err == nil && ok && signatureParams[name] {
				parts[i] = k + "=REDACTED"
			}
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	return c.String()
}

func hasSignature(rawQuery string) bool {
	for p := range strings.SplitSeq(rawQuery, "&") {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err == nil && signatureParams[name] {
			return true
		}
	}
	return false
}
