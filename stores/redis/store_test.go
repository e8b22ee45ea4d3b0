package redis_test

import (
	"testing"

	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/idempotency/storetest"
	"github.com/retrystack/retrystack/stores/redis"
)

// The store passes the conformance tests against a real redis-server at
// REDIS_ADDR (.ci/run installs and starts one). Without REDIS_ADDR the test
// is skipped, unless REDIS_REQUIRED is set, as .ci/run sets it.
func TestConformance(t *testing.T) {
	c := testClient(t)
	storetest.Run(t, func(*testing.T) idempotency.Store { return redis.New(c, "retrystack-test:") })
}
