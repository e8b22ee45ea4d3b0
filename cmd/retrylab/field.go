package main

import "github.com/retrystack/retrystack/internal/faultserver"

// fieldRows are faults of the field, met inside the SDKs and proxies the
// library is embedded behind, under retrystack's defaults.
var fieldRows = []scenario{
	{
		id:     "field/h2-reset-get",
		setup:  "policy.Default(); an h2c server resets the first stream with RST_STREAM(INTERNAL_ERROR) after reading the request (what a reverse proxy does when its upstream fails), then answers 200; one GET",
		preset: "default", h2: []faultserver.H2Fault{faultserver.H2ResetInternalError}, run: get("/"),
		want: expect{"2", "200", "success", "-"},
		note: "the request was sent and got no response, as when an HTTP/1.1 connection is reset: an idempotent request is retried (RFC 9110 §9.2.2).",
	},
	{
		id:     "field/h2-reset-post",
		setup:  "the same server; one POST without an Idempotency-Key, which the server may have processed",
		preset: "default", h2: []faultserver.H2Fault{faultserver.H2ResetInternalError},
		run:  func(t *trial) { t.send("POST", "/", "bytes") },
		want: expect{"1", "error", "not-idempotent", "-"},
		note: "the same reset; the POST may have had its effect, so it is not resent.",
	},
}
