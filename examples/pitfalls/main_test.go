package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := `1. A POST is sent three times
  naive 503 classifier
    hook: pitfall non-idempotent-retried
    hook: pitfall non-idempotent-retried
    hook: pitfall exhausted-retryable-status
    orders written: 3
  fix: policy.Default()
    orders written: 1
2. Exhausted retries hand back Ok(503)
  default
    hook: pitfall exhausted-retryable-status
    err == nil, status 503: looks like success to a caller who checks only err
  fix: FailOnExhausted
    error: status 503 after 3 attempts
3. A retried-away response's Set-Cookie is lost
  reqwest's order, redirect → cookies → retry
    hook: pitfall non-idempotent-retried
    hook: pitfall cookie-lost (cookies lb)
    /me received Cookie: session=abc
  fix: capture discarded cookies
    hook: pitfall non-idempotent-retried
    /me received Cookie: lb=node-2; session=abc
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
