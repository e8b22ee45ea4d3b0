package main

import (
	"net/http"

	"github.com/retrystack/retrystack/policy"
)

// Seed 003's classifiers, on reqwest's for_host(127.0.0.1): the naive one
// retries every 503; the fixed one checks the method's idempotency first.
var (
	naive503 = retry503
	fixed503 = func(p *policy.Policy) {
		p.Classify = policy.Rules{
			Statuses: policy.NewStatusSet(503),
			Safe:     func(r *http.Request) bool { return idempotentMethod(r.Method) },
		}.Classify
	}
)

// postOrders sends POST /orders and notes how many orders the server wrote.
func postOrders(t *trial) {
	t.send("POST", "/orders", `{"item":1}`)
	recordProcessed(t, "orders_written", "/orders")
}

// loginThenMe logs in, then asks /me which cookies it was sent.
func loginThenMe(t *trial) {
	t.send("POST", "/login", "user=a")
	_, body, _ := t.send("GET", "/me", "")
	t.extra["me_cookie"] = body
}

// seed003 reproduces seed 003's reqwest pitfalls with a custom classifier.
var seed003 = []scenario{
	{
		id:     "seed003/naive-post-orders",
		setup:  "for_host + 503 classifier that ignores the method, cookies on; POST /orders (counts, then 503)",
		preset: "reqwest-for-host", tune: naive503, run: postOrders,
		want:     expect{"3", "503", "attempts-exhausted", "orders_written=3;pitfalls=non-idempotent-retried,exhausted-retryable-status"},
		wantOurs: &expect{"1", "503", "not-idempotent", "orders_written=1"},
	},
	{
		id:     "seed003/naive-login-then-me",
		setup:  "same client; POST /login (503 + Set-Cookie lb=node-2, then 200 + Set-Cookie session=abc), then GET /me",
		preset: "reqwest-for-host", tune: naive503, run: loginThenMe,
		want: expect{"2,1", "200", "success", "me_cookie=session=abc;pitfalls=cookie-lost"},
	},
	{
		id:     "seed003/fixed-post-orders",
		setup:  "classifier checks idempotency first; POST /orders",
		preset: "reqwest-for-host", tune: fixed503, run: postOrders,
		want: expect{"1", "503", "not-idempotent|non-retryable", "orders_written=1"},
	},
	{
		id:     "seed003/fixed-get-orders",
		setup:  "same fixed client; GET /orders (503)",
		preset: "reqwest-for-host", tune: fixed503, run: get("/orders"),
		want: expect{"3", "503", "attempts-exhausted", "-"},
	},
	{
		id:     "seed003/fixed-login-then-me",
		setup:  "same fixed client, fresh cookie state; POST /login, then GET /me",
		preset: "reqwest-for-host", tune: fixed503, run: loginThenMe,
		want: expect{"1,1", "503", "not-idempotent|non-retryable", "me_cookie=lb=node-2"},
	},
	{
		id:     "seed003/swapped-login-then-me",
		setup:  "naive classifier, stack redirect → retry → cookies → transport; POST /login, then GET /me",
		preset: "reqwest-for-host", tune: naive503, stack: []string{"redirect", "retry", "cookies"}, run: loginThenMe,
		want: expect{"2,1", "200", "success", "me_cookie=lb=node-2; session=abc"},
	},
	{
		id:     "seed003/default-post-orders",
		setup:  "policy.Default(), default stack; POST /orders",
		preset: "default", run: postOrders,
		want: expect{"1", "503", "not-idempotent", "orders_written=1"},
	},
}

// fixes are the lab's own rows: seed 003's cookie loss, fixed without
// leaving reqwest's order.
var fixes = []scenario{
	{
		id:     "fix/capture-login-then-me",
		setup:  "as seed003/naive-login-then-me, reqwest's order, with the cookie layer capturing discarded attempts",
		preset: "reqwest-for-host", tune: naive503, capture: true, run: loginThenMe,
		want: expect{"2,1", "200", "success", "me_cookie=lb=node-2; session=abc"},
	},
}

// idempotentMethod reports whether RFC 9110 calls method idempotent.
func idempotentMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete, "":
		return true
	}
	return false
}
