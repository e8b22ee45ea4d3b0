package policy_test

import (
	"fmt"
	"net/http"

	"github.com/retrystack/retrystack/policy"
)

// A Rules without Safe retries only idempotent or keyed requests: a POST
// that got a 503 stops, a GET is retried. Retrying a POST anyway must be
// asked for, with AnyRequest.
func ExampleRules() {
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable}
	post, _ := http.NewRequest(http.MethodPost, "http://example.test/orders", nil)
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/orders", nil)

	safe := policy.Rules{Statuses: policy.NewStatusSet(503)}
	naive := policy.Rules{Statuses: policy.NewStatusSet(503), Safe: policy.AnyRequest}
	for _, req := range []*http.Request{post, get} {
		a := policy.Attempt{Request: req, Response: resp, Number: 1, Processed: policy.Responded}
		fmt.Printf("%s: safe %+v, naive %+v\n", req.Method, safe.Classify(a), naive.Classify(a))
	}
	// Output:
	// POST: safe {Retry:false Stop:not-idempotent Cause:}, naive {Retry:true Stop: Cause:status}
	// GET: safe {Retry:true Stop: Cause:status}, naive {Retry:true Stop: Cause:status}
}
