// Package faultserver is a scriptable, misbehaving origin for tests, the lab,
// the examples and users' own tests. It reproduces every server the lab's
// experiments need (docs/presets.md names the systems they come from): statuses that never change or change after K requests, writes
// that are processed and then fail, cookies set on responses a retry layer
// throws away, Retry-After hints in every form, slow headers and bodies,
// redirect chains, and connections dropped with or without a response.
//
// [New] starts an HTTP/1.1 server; [NewH2] starts a prior-knowledge h2c
// server, written at the frame level, that refuses streams or sends GOAWAY
// before it serves. Both listen on 127.0.0.1:0, are safe for concurrent use,
// print nothing, and leave no goroutine behind after Close.
//
// # Routes of the HTTP/1.1 server
//
// Every route but /upload reads the whole request body first and logs the request (see
// [Entry], which keeps the traceparent header too). State and counters are kept per route and per key, the query
// parameter "key" (empty when absent), so parallel tests that use distinct
// keys never see each other's requests.
//
//	/s/{code}              always answers code
//	/{endpoint}/s{code}    the same, one route per endpoint (e.g. /payments/s503)
//	/fail/{K}/{code}       answers code K times, then 200 (then=C: C, with Location to=URL)
//	/stall/{K}             holds the first K requests unanswered until their client gives up, then answers 200
//	/abort                 a POST is processed (counted); then the connection closes without a response
//	                       (reset=1: with a TCP RST)
//	/orders                a POST is processed (counted), then answered 503
//	/login                 first 503 + Set-Cookie lb=node-2, then 200 + Set-Cookie session=abc
//	/me                    200 with the Cookie header it received as the body
//	/write                 a POST is processed once per Idempotency-Key (every time without one);
//	                       drop=N: the first N requests are processed, then the connection is dropped
//	/slow/headers          waits delay=D before the headers (code=C, default 200); with every=N
//	                       only every Nth request (per key) waits D, the others base=D2 (default 0)
//	/slow/body             sends the headers and half the body (size=N, default 64), waits delay=D, sends the rest
//	/truncated             promises size=N bytes (default 1000), sends half and closes the connection (reset=1: with an RST)
//	/redirect/{code}/{n}   answers code with a Location one hop closer to /redirect/{code}/0,
//	                       which echoes like /echo; the Location is an absolute path, or with
//	                       rel=1 relative to the current path ("1?..."), with abs=1 an absolute URL;
//	                       cross=1 makes each hop cross origins (127.0.0.1 ↔ localhost);
//	                       to=URL is the last hop's Location; cookie=NAME sets the cookie NAME=hop{n}
//	                       on each hop; the query is kept on every hop
//	/redirect/{code}/loop  answers code with a Location pointing at itself
//	/echo                  200 with a JSON [Echo] of the request
//	/auth                  401 unless "Authorization: Bearer T" with T = token (default "new");
//	                       then 200 with T as the body
//	/upload                reads read=N bytes (default 64 KiB) of the first request's body per key,
//	                       then resets the connection; later requests: 200 with the body's SHA-256 (hex)
//
// The status routes (/s, /fail, /slow/headers) take optional parameters:
// size=N for an N-byte body, retry-after=V for a literal Retry-After header
// (seconds, fractions, garbage: anything), and retry-after-in=D for an
// HTTP-date D from now (negative: in the past), written in the form
// retry-after-form=imf (default), rfc850 or asctime; header=Name:Value
// (repeatable) for any other header, such as a RateLimit field; and
// ratelimit-reset-in=D for GitHub's primary rate limit: X-RateLimit-Remaining:
// 0 with X-RateLimit-Reset the Unix time D from now. On /fail they apply to
// the failing answers only.
package faultserver
