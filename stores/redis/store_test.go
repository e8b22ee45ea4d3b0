package redis_test

import (
	"context"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/idempotency/storetest"
	"github.com/retrystack/retrystack/stores/redis"
)

// The store passes the conformance tests against a real redis-server at
// REDIS_ADDR (.ci/run installs and starts one). Without REDIS_ADDR the test
// is skipped, unless REDIS_REQUIRED is set, as .ci/run sets it.
func TestConformance(t *testing.T) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		if os.Getenv("REDIS_REQUIRED") != "" {
			t.Fatal("REDIS_REQUIRED is set but REDIS_ADDR is not")
		}
		t.Skip("set REDIS_ADDR to a redis-server (.ci/run starts one)")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis-server at %s: %v", addr, err)
	}
	storetest.Run(t, func(*testing.T) idempotency.Store { return redis.New(c, "retrystack-test:") })
}
