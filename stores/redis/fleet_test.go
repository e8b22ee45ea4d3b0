package redis

import (
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack/policy"
)

// testClient is a client of the redis-server at REDIS_ADDR (.ci/run starts
// one); without REDIS_ADDR the test is skipped, unless REDIS_REQUIRED is
// set.
func testClient(t *testing.T) *goredis.Client {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		if os.Getenv("REDIS_REQUIRED") != "" {
			t.Fatal("REDIS_REQUIRED is set but REDIS_ADDR is not")
		}
		t.Skip("set REDIS_ADDR to a redis-server (.ci/run starts one)")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis-server at %s: %v", addr, err)
	}
	return c
}

// newTestFleet is a Fleet named name on c whose background exchange does
// not fire during a test (an interval of 10 s): the test exchanges itself,
// so that what each process knows is decided by the test, not by a clock.
// The first exchange, made as it starts, is waited for.
func newTestFleet(t *testing.T, c goredis.UniversalClient, cfg FleetConfig) *Fleet {
	t.Helper()
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	f, err := NewFleet(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	f.exchange() // after the starting one: exchanges are one at a time
	return f
}

// fleetName is a name of the test's own, so that tests (and runs) do not
// share figures; the keys are deleted after the test.
func fleetName(t *testing.T, c goredis.UniversalClient) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()) + "." + time.Now().Format("150405.000000")
	t.Cleanup(func() {
		tag := "retrystack:fleet:{" + name + "}:"
		c.Del(context.Background(), tag+"b", tag+"c", tag+"h")
	})
	return name
}

func TestFleetSuccessesPayForAnotherProcesssRetries(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	busy := newTestFleet(t, c, FleetConfig{Name: name})
	small := newTestFleet(t, c, FleetConfig{Name: name})

	// Two idle processes: the fleet's stock is what each brought as it
	// joined (Burst, 2), and nothing refills it with time. Between two
	// exchanges a process spends its share (2), then the rest.
	first := drain(small)
	if first != 2 {
		t.Fatalf("a process of a fleet of 2 idle ones paid %d retries before its next exchange, want its share, 2", first)
	}
	if n := first + drainExchanging(small); n != 4 {
		t.Fatalf("a fleet of 2 idle processes paid %d retries, want 4 (2 each)", n)
	}
	busy.exchange()
	if busy.Withdraw() {
		t.Fatal("the other process paid a retry from a stock the first had spent")
	}

	// The busy process's 100 successes earn 20 retries for the fleet: the
	// small one may spend them once it has heard of them.
	for range 100 {
		busy.Deposit()
	}
	if small.Withdraw() {
		t.Fatal("a process paid a retry with credit it had not heard of")
	}
	busy.exchange()
	if n := drainExchanging(small); n != 20 {
		t.Errorf("after the busy process's 100 successes the small one paid %d retries, want 20", n)
	}
	busy.exchange()
	if busy.Withdraw() {
		t.Error("the busy process paid a retry from a stock the small one had spent")
	}
}

// drainExchanging withdraws from f, exchanging whenever it refuses, until
// it refuses right after an exchange, and counts.
func drainExchanging(f *Fleet) int {
	n := 0
	for {
		f.exchange()
		got := drain(f)
		if got == 0 {
			return n
		}
		n += got
	}
}

// drain withdraws from b until it refuses, and counts.
func drain(b policy.Budget) int {
	n := 0
	for b.Withdraw() && n < 10_000 {
		n++
	}
	return n
}

// The timeout rule looks at the fleet's last second: with 20 successes in
// it, the fleet pays for the retries of 6 timeouts (2, and a fifth of the
// successes), whichever processes met them, and not a seventh; and a
// process that meets a second timeout before its next exchange, with no
// success in between, is refused at once (a brown-out seen by the process
// itself).
func TestFleetTimeoutRuleOnTheFleetsLastSecond(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	busy := newTestFleet(t, c, FleetConfig{Name: name})
	for range 20 {
		busy.Deposit()
	}
	busy.exchange()
	first := newTestFleet(t, c, FleetConfig{Name: name})
	if !first.WithdrawAfterTimeout() {
		t.Fatal("the first timeout of a fleet with 20 successes in its last second was not retried")
	}
	if first.WithdrawAfterTimeout() {
		t.Error("a process's second timeout before its next exchange, no success between, was paid")
	}
	first.exchange() // the fleet has met 2 timeouts
	for i := 3; i <= 7; i++ {
		p := newTestFleet(t, c, FleetConfig{Name: name})
		if got, want := p.WithdrawAfterTimeout(), i <= 6; got != want {
			t.Errorf("timeout %d of a fleet with 20 successes in its last second, each in a process of its own: retry paid %v, want %v", i, got, want)
		}
		p.exchange()
	}
}

// A refund pays back, to the fleet, a retry of an operation that
// succeeded.
func TestFleetRefund(t *testing.T) {
	c := testClient(t)
	f := newTestFleet(t, c, FleetConfig{Name: fleetName(t, c), Burst: 1})
	if !f.Withdraw() || f.Withdraw() {
		t.Fatal("a fleet of one process with Burst 1 did not pay exactly one retry")
	}
	f.Refund()
	if !f.Withdraw() {
		t.Fatal("a refunded retry could not be spent again")
	}
	f.Refund()
	f.exchange()
	if got := f.Retries(); got != 1 {
		t.Errorf("after an exchange the refunded retry is %d retries, want 1", got)
	}
}

// A Retry-After that one process is answered holds the others from their
// next exchange, and a hold travels as the time it has left: Redis's clock
// times it, not the processes'.
func TestFleetHoldsEveryProcess(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	a := newTestFleet(t, c, FleetConfig{Name: name})
	b := newTestFleet(t, c, FleetConfig{Name: name})
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/x", nil)
	until := time.Now().Add(30 * time.Second)

	a.Hold(req, "api.example.com", until)
	if got := a.HeldUntil(req, "api.example.com"); !got.Equal(until) {
		t.Fatalf("the process that holds waits until %v, want %v", got, until)
	}
	if got := b.HeldUntil(req, "api.example.com"); !got.IsZero() {
		t.Fatalf("another process holds before any exchange: until %v", got)
	}
	a.exchange()
	b.exchange()
	got := b.HeldUntil(req, "api.example.com")
	if got.Before(until) || got.After(until.Add(time.Second)) {
		t.Errorf("another process holds until %v, want %v (or up to a second later: the round trips)", got, until)
	}
	if other := b.HeldUntil(req, "other.example.com"); !other.IsZero() {
		t.Errorf("another host is held until %v", other)
	}

	// Redis stores the hold on its own clock.
	left, err := c.HGet(context.Background(), a.keys[2], "host:api.example.com").Int64()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.UnixMilli(left).Sub(now); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("Redis holds the host for %v from its own clock, want about 30s", d)
	}
}

// A Scope holds every request that names it, whatever its host, and Redis
// never sees what the Scope returned.
func TestFleetHoldsAScope(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	token := func(r *http.Request) string { return r.Header.Get("Authorization") }
	a := newTestFleet(t, c, FleetConfig{Name: name, Scope: token})
	b := newTestFleet(t, c, FleetConfig{Name: name, Scope: token})
	with := func(host, auth string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
		r.Header.Set("Authorization", auth)
		return r
	}
	until := time.Now().Add(time.Minute)
	a.Hold(with("api.example.com", "Bearer s3cret-A"), "api.example.com", until)
	a.exchange()
	b.exchange()
	if got := b.HeldUntil(with("uploads.example.com", "Bearer s3cret-A"), "uploads.example.com"); got.Before(until) {
		t.Errorf("the same token to another host is held until %v, want %v", got, until)
	}
	if got := b.HeldUntil(with("api.example.com", "Bearer s3cret-B"), "api.example.com"); !got.IsZero() {
		t.Errorf("another token is held until %v", got)
	}
	if got := b.HeldUntil(with("api.example.com", ""), "api.example.com"); !got.IsZero() {
		t.Errorf("a request without a token (the host's scope) is held until %v", got)
	}
	fields, err := c.HKeys(context.Background(), a.keys[2]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.Contains(f, "s3cret") {
			t.Errorf("Redis holds the scope's own text: %q", f)
		}
	}
	if len(fields) != 1 {
		t.Errorf("Redis holds %d scopes, want 1: %q", len(fields), fields)
	}
}

// Names that would make odd keys, or move them to another cluster slot,
// are a *policy.ConfigError naming the field, as are bad numbers.
func TestFleetConfigErrors(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		cfg   FleetConfig
		field string
	}{
		{FleetConfig{}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: "a}b"}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: "orders fleet"}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: "zoë"}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: "x\r\nFLUSHALL"}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: strings.Repeat("a", 65)}, "redis.FleetConfig.Name"},
		{FleetConfig{Name: "ok", Interval: time.Millisecond}, "redis.FleetConfig.Interval"},
		{FleetConfig{Name: "ok", Interval: -time.Second}, "redis.FleetConfig.Interval"},
		{FleetConfig{Name: "ok", Ratio: 2}, "redis.FleetConfig.Ratio"},
		{FleetConfig{Name: "ok", Ratio: math.NaN()}, "redis.FleetConfig.Ratio"},
		{FleetConfig{Name: "ok", Burst: -1}, "redis.FleetConfig.Burst"},
		{FleetConfig{Name: "ok", Burst: math.MaxInt}, "redis.FleetConfig.Burst"},
	} {
		f, err := NewFleet(c, tc.cfg)
		var ce *policy.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			if f != nil {
				f.Close()
			}
			t.Errorf("NewFleet(%+v) = %v, want a *policy.ConfigError for %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := NewFleet(nil, FleetConfig{Name: "ok"}); err == nil {
		t.Error("NewFleet(nil, …) returned no error")
	}
}

// Processes whose clocks disagree by minutes share a hold as the time it
// has left: each waits as long as the first was asked to, by its own
// clock.
func TestFleetHoldAcrossClocksThatDisagree(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	defer func() { clock = time.Now }()
	clock = func() time.Time { return time.Now().Add(5 * time.Minute) }
	ahead := newTestFleet(t, c, FleetConfig{Name: name})
	clock = func() time.Time { return time.Now().Add(-5 * time.Minute) }
	behind := newTestFleet(t, c, FleetConfig{Name: name})
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)

	ahead.Hold(req, "api.example.com", ahead.now().Add(10*time.Second))
	ahead.exchange()
	behind.exchange()
	left := behind.HeldUntil(req, "api.example.com").Sub(behind.now())
	if left < 9*time.Second || left > 11*time.Second {
		t.Errorf("a process 10 minutes behind holds for %v by its clock, want about 10s", left)
	}
}

// A Scope that returns odd text (line breaks, bytes that are not UTF-8, a
// megabyte) holds as any other, and Redis stores a short hash of it; a
// host longer than a key should be is hashed too.
func TestFleetOddScopes(t *testing.T) {
	c := testClient(t)
	name := fleetName(t, c)
	scope := func(r *http.Request) string { return r.Header.Get("X-Scope") }
	a := newTestFleet(t, c, FleetConfig{Name: name, Scope: scope})
	b := newTestFleet(t, c, FleetConfig{Name: name, Scope: scope})
	until := time.Now().Add(time.Minute)
	long := strings.Repeat("h", 300) + ".example.com"
	for _, odd := range []string{"a\r\nFLUSHALL\r\n", "\xff\xfe{x}", strings.Repeat("s", 1<<20), ""} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+long+"/", nil)
		req.Header["X-Scope"] = []string{odd}
		a.Hold(req, long, until)
		a.exchange()
		b.exchange()
		if got := b.HeldUntil(req, long); got.Before(until) {
			t.Errorf("scope %.20q: the other process holds until %v, want %v", odd, got, until)
		}
	}
	fields, err := c.HKeys(context.Background(), a.keys[2]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if len(f) > 64 {
			t.Errorf("Redis holds a scope of %d bytes: %.40q", len(f), f)
		}
	}
	if len(fields) != 4 {
		t.Errorf("Redis holds %d scopes, want 4 (3 odd ones, and the long host's)", len(fields))
	}
}

// A fleet whose processes hold ever more scopes (a Scope per tenant) keeps
// at most 10 000 in Redis, and a process at most 10 000 in memory.
func TestFleetHoldsAreBounded(t *testing.T) {
	c := testClient(t)
	f := newTestFleet(t, c, FleetConfig{Name: fleetName(t, c)})
	until := time.Now().Add(time.Minute)
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	for i := range maxHolds + 500 {
		f.Hold(req, "h"+strconv.Itoa(i)+".example.com", until)
		if i%maxHoldsSent == maxHoldsSent-1 {
			f.exchange() // an exchange sends at most maxHoldsSent
		}
	}
	f.exchange()
	n, err := c.HLen(context.Background(), f.keys[2]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != maxHolds {
		t.Errorf("Redis holds %d scopes, want %d", n, maxHolds)
	}
	if got := f.nholds.Load(); got != maxHolds {
		t.Errorf("the process holds %d scopes, want %d", got, maxHolds)
	}
	if !f.Sharing() {
		t.Error("a full holds hash stopped the fleet sharing")
	}
}
