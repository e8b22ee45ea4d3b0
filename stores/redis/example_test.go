package redis_test

import (
	"log"
	"net/http"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/stores/redis"
)

// A fleet's processes share one retry budget and one set of pacing holds:
// each process makes one Fleet, and every client of the process uses it.
// (No Output: it needs a Redis; TestFleetTransportsShareAHold runs the
// same wiring against one.)
func ExampleNewFleet() {
	// snippet: fleet-wiring
	rdb := goredis.NewClient(&goredis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // an exchange then ends at its own timeout
	})
	fleet, err := redis.NewFleet(rdb, redis.FleetConfig{
		Name: "orders-service", // every process of the fleet gives the same name
		// One account's rate limit, whatever the host: Redis stores a
		// hash of what Scope returns, never the string itself.
		Scope: func(r *http.Request) string { return r.Header.Get("X-Account") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fleet.Close()

	p := policy.Default()
	p.Budget = fleet            // the fleet's successes pay for its retries
	p.RetryAfter.Shared = fleet // one process's Retry-After holds them all
	rt, err := retrystack.NewTransport(retrystack.Config{Policy: &p})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: rt}
	// end snippet
	_ = client
}
