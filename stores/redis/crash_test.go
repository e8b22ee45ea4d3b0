package redis_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/testkit/crashtest"
	"github.com/retrystack/retrystack/stores/redis"
)

// A keyed POST whose server process dies (SIGKILL), then starts again,
// while a retrystack client retries it. The order is a write of the
// service's own (here a counter in the same Redis), which the store
// cannot commit with its record: this states the store's window.
//
//   - after-complete: the order placed and the answer stored, not sent.
//     The retry gets the stored answer: one order.
//   - before-complete: the order placed, the process dies before the
//     answer is stored. The claim holds the key until its lease ends (the
//     client asks again meanwhile), then the retry places the order
//     again: two orders. That is the window the Postgres store closes
//     (its test kills at the same point and counts one order); here a
//     handler closes it itself only by making idempotency.KeyOf part of
//     its own write.
func TestCrash(t *testing.T) {
	if crashtest.IsChild() {
		serveOrders(t)
		return
	}
	c := testClient(t)
	for _, tt := range []struct {
		at     string
		orders int64
	}{{"after-complete", 1}, {"before-complete", 2}} {
		t.Run(tt.at, func(t *testing.T) {
			run := fmt.Sprintf("retrystack-test:orders:%s-%d", tt.at, time.Now().UnixNano())
			srv := crashtest.Start(t, "TestCrash", "CRASH_AT="+tt.at, "CRASH_RUN="+run)
			done := srv.Post("/orders", `{"item":"book"}`)
			srv.Await("placed")
			srv.Crash()
			srv.Restart("CRASH_RUN=" + run)
			r := <-done
			orders, err := c.Get(context.Background(), run).Int64()
			if err != nil {
				t.Fatal(err)
			}
			if r.Err != nil || r.Status != http.StatusCreated || orders != tt.orders {
				t.Fatalf("%d %v (%v); %d orders: want 201 and %d", r.Status, r.Err, r.Report, orders, tt.orders)
			}
		})
	}
}

// testClient is a client of the redis-server at REDIS_ADDR (see
// fleet_test.go's).
func testClient(t *testing.T) *goredis.Client { return redis.TestRedis(t) }

// serveOrders is the child: an orders service that places an order (a
// counter) and dies where CRASH_AT says on its first request.
func serveOrders(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: os.Getenv("REDIS_ADDR")})
	at, run := os.Getenv("CRASH_AT"), os.Getenv("CRASH_RUN")
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.Incr(r.Context(), run).Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if at == "before-complete" {
			fmt.Println("placed")
			select {} // killed here
		}
		w.WriteHeader(http.StatusCreated)
	})
	var s idempotency.Store = redis.New(c, "retrystack-test:crash:")
	if at == "after-complete" {
		s = dieAfterComplete{s}
	}
	t.Fatal(crashtest.Serve(idempotency.Handler(orders, idempotency.Config{Store: s, Lease: time.Second})))
}

type dieAfterComplete struct{ idempotency.Store }

func (s dieAfterComplete) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	c, rec, err := s.Store.Begin(ctx, key, fp, lease)
	if c != nil {
		c = dyingClaim{c}
	}
	return c, rec, err
}

type dyingClaim struct{ idempotency.Claim }

func (c dyingClaim) Complete(ctx context.Context, rec *idempotency.Record, keep time.Duration) error {
	if err := c.Claim.Complete(ctx, rec, keep); err != nil {
		return err
	}
	fmt.Println("placed")
	select {} // killed here
}
