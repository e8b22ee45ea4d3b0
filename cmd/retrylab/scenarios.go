package main

import (
	"strconv"
	"time"

	"github.com/retrystack/retrystack/faultserver"
)

// hiddenResend explains rows where net/http resends by itself.
const hiddenResend = "net/http resends a refused or GOAWAY'd HTTP/2 stream by itself: one call, two streams on the wire"

// scenarios are the lab's rows, in the order they print.
var scenarios = []scenario{
	{
		id:     "base/get-503",
		setup:  "no retry layer; GET /s/503: the 503 comes back as a response, not an error (the Ok(503) trap)",
		preset: "none",
		run:    func(t *trial) { t.send("GET", "/s/503", "") },
		want:   figures{ServerRequests: []int{1}, Result: "503"},
	},
	{
		id:     "base/error-for-status-503",
		setup:  "error-for-status layer; GET /s/503: the final 503 becomes a typed error",
		preset: "none",
		stack:  []string{"error-for-status"},
		run:    func(t *trial) { t.send("GET", "/s/503", "") },
		want:   figures{ServerRequests: []int{1}, Result: "error"},
	},
	{
		id:     "base/get-abort",
		setup:  "no retry layer; GET /abort on a fresh connection: the server closes it without a response",
		preset: "none",
		run:    func(t *trial) { t.send("GET", "/abort", "") },
		want:   figures{ServerRequests: []int{1}, Result: "error"},
	},
	{
		id:     "base/post-orders",
		setup:  "no retry layer; POST /orders (written, then 503)",
		preset: "none",
		run: func(t *trial) {
			t.send("POST", "/orders", `{"item":1}`)
			t.extra["orders_written"] = strconv.Itoa(t.srv.Stats("/orders", t.key).Processed)
		},
		want: figures{ServerRequests: []int{1}, Result: "503", Extra: map[string]string{"orders_written": "1"}},
	},
	{
		id:     "base/login-then-me",
		setup:  "no cookie layer; POST /login (503 + Set-Cookie lb=node-2), then GET /me: nothing was stored",
		preset: "none",
		run: func(t *trial) {
			t.send("POST", "/login", "user=a")
			_, body, _ := t.send("GET", "/me", "")
			t.extra["me_cookie"] = body
		},
		want: figures{ServerRequests: []int{1, 1}, Result: "503", Extra: map[string]string{"me_cookie": ""}},
	},
	{
		id:     "base/redirect-not-followed",
		setup:  "no redirect layer, and the client's own CheckRedirect is off; GET /redirect/302/1",
		preset: "none",
		run:    func(t *trial) { t.send("GET", "/redirect/302/1", "") },
		want:   figures{ServerRequests: []int{1}, Result: "302"},
	},
	{
		id:             "base/attempt-timeout-slow-headers",
		setup:          "timeout layer, attempt 50 ms; headers delayed 250 ms",
		preset:         "none",
		stack:          []string{"timeout"},
		attemptTimeout: 50 * time.Millisecond,
		run:            func(t *trial) { t.send("GET", "/slow/headers?delay=250ms", "") },
		want:           figures{ServerRequests: []int{1}, Result: "error"},
	},
	{
		id:     "base/h2-get-refused-1",
		setup:  "no retry layer, h2c; the server refuses the first stream; GET",
		preset: "none",
		h2:     []faultserver.H2Fault{faultserver.H2Refuse},
		run:    func(t *trial) { t.send("GET", "/", "") },
		want:   figures{ServerRequests: []int{2}, Result: "200"},
		note:   hiddenResend + ".",
	},
	{
		id:     "base/h2-post-refused-1",
		setup:  "no retry layer, h2c; the server refuses the first stream; POST with a replayable body",
		preset: "none",
		h2:     []faultserver.H2Fault{faultserver.H2Refuse},
		run:    func(t *trial) { t.send("POST", "/", "payload") },
		want:   figures{ServerRequests: []int{2}, Result: "200"},
		note:   hiddenResend + ", a POST included when its body can be replayed.",
	},
	{
		id:     "base/h2-get-goaway",
		setup:  "no retry layer, h2c; the server answers the first stream with GOAWAY(NO_ERROR) below it; GET",
		preset: "none",
		h2:     []faultserver.H2Fault{faultserver.H2GoAway},
		run:    func(t *trial) { t.send("GET", "/", "") },
		want:   figures{ServerRequests: []int{2}, Result: "200"},
		note:   hiddenResend + ", on a new connection.",
	},
}
