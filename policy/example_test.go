package policy_test

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/retrystack/retrystack/policy"
	"github.com/sethvargo/go-retry"
)

// A Rules without Safe retries only idempotent or keyed requests: a POST
// that got a 503 stops, a GET is retried. Retrying a POST anyway must be
// spelled out, with a Safe that accepts every request.
func ExampleRules() {
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable}
	post, _ := http.NewRequest(http.MethodPost, "http://example.test/orders", nil)
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/orders", nil)

	safe := policy.Rules{Statuses: policy.NewStatusSet(503)}
	naive := policy.Rules{Statuses: policy.NewStatusSet(503), Safe: func(*http.Request) bool { return true }}
	for _, req := range []*http.Request{post, get} {
		a := policy.Attempt{Request: req, Response: resp, Number: 1, Processed: policy.Responded}
		fmt.Printf("%s: safe %+v, naive %+v\n", req.Method, safe.Classify(a), naive.Classify(a))
	}
	// Output:
	// POST: safe {Retry:false Stop:not-idempotent Cause:}, naive {Retry:true Stop: Cause:status}
	// GET: safe {Retry:true Stop: Cause:status}, naive {Retry:true Stop: Cause:status}
}

// Any go-retry backoff can shape the waits, made anew for each operation:
// here a constant 100 ms, capped at two retries by go-retry itself.
func ExampleBackoff_make() {
	b := policy.Backoff{Make: func() retry.Backoff {
		return retry.WithMaxRetries(2, retry.NewConstant(100*time.Millisecond))
	}}
	waits := b.New(nil)
	for range 3 {
		d, stop := waits.Next()
		fmt.Println(d, stop)
	}
	// Output:
	// 100ms false
	// 100ms false
	// 0s true
}

// A Budget of your own: anything with Deposit and Withdraw. This one
// allows a fixed number of retries in all.
func ExampleBudget() {
	p := policy.Default()
	p.Budget = &fixedRetries{left: 1}
	fmt.Println(p.Validate(), p.Budget.Withdraw(), p.Budget.Withdraw())
	// Output: <nil> true false
}

type fixedRetries struct {
	mu   sync.Mutex
	left int
}

func (f *fixedRetries) Deposit() {}

func (f *fixedRetries) Withdraw() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == 0 {
		return false
	}
	f.left--
	return true
}

// Start from a preset and change fields; a Policy built from its zero
// value is invalid, and its error says where to start.
func ExampleDefault() {
	p := policy.Default()
	p.Timeout = 10 * time.Second // one deadline for attempts, waits and the final body
	fmt.Println(p.Name, p.MaxAttempts, p.Backoff.Base, p.Backoff.Cap, p.Timeout, p.Validate())

	zero := policy.Policy{Timeout: 10 * time.Second}
	fmt.Println(zero.Validate())
	// Output:
	// default 3 100ms 8s 10s <nil>
	// retrystack: policy.Policy.MaxAttempts = 0: a Policy built from its zero value retries nothing and is invalid: start from policy.Default() (or policy.Never()) and change fields, e.g. p := policy.Default(); p.Timeout = 10 * time.Second
}
