package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMain runs a child's role when the smoke test starts this test
// binary again as the fleet's server or client process.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		os.Exit(runRole(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

// A tiny fleet end to end, in real processes: 2 processes of 2 clients,
// 100 operations a second for 2.5 s with a short trigger, each client's
// own budget, then one Fleet a process through a real redis-server.
// Every process must report every operation of its share, the server must
// have seen them, and in the shared cell every process must have
// exchanged with Redis (Redis counts it in the fleet) and still share.
func TestSmallFleetEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") != "" {
			t.Fatal("REDIS_REQUIRED is set but redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var plan []cell
	for _, v := range []string{"local", "shared"} {
		c := overloadCell(v, 4, 2, 100, time.Second, time.Second)
		c.Trigger = 500 * time.Millisecond
		plan = append(plan, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := runCells(ctx, self, "redis-server", 100*time.Millisecond, plan, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(plan) {
		t.Fatalf("%d rows for %d cells", len(rows), len(plan))
	}
	for _, r := range rows {
		want := int(100 * plan[0].total().Seconds())
		if r.Reported != 2 || r.Ops != want || r.Missing != 0 {
			t.Errorf("%s: %d processes reported %d operations (%d missing), want 2 reporting %d", r.Variant, r.Reported, r.Ops, r.Missing, want)
		}
		if r.Requests < int64(r.Ops) || r.Attempts < int64(r.Ops) {
			t.Errorf("%s: the server received %d requests, the clients sent %d, for %d operations", r.Variant, r.Requests, r.Attempts, r.Ops)
		}
		if r.SuccessPct < 90 || r.Goodput == nil {
			t.Errorf("%s: %.2f %% of operations succeeded at a tenth of the capacity (goodput %v)", r.Variant, r.SuccessPct, r.Goodput)
		}
	}
	if s := rows[1]; s.RedisProcs != 2 || s.SharedAtEnd != 2 {
		t.Errorf("shared: Redis counts %d processes in the fleet, %d shared at the end; want 2 and 2", s.RedisProcs, s.SharedAtEnd)
	}
}

// The report's arithmetic on a made-up run: a trigger whose operations
// fail until 300 ms after its end, and the quota's leaks counted strictly
// inside the first 429's hold.
func TestReduce(t *testing.T) {
	c := cell{Kind: "overload", Variant: "shared", P: 1, M: 1, Rate: 100, Path: "/quota",
		Warmup: time.Second, Trigger: time.Second, After: 6 * time.Second}
	n := int(c.Rate * c.total().Seconds())
	o := outcome{cell: c, ok: make([]bool, n), reported: make([]bool, n), stats: serverStats{Requests: int64(n), AtTrigger: 100, AtIncidentEnd: 700}}
	for i := range n {
		at := time.Duration(i) * 10 * time.Millisecond
		o.ok[i] = at < c.Warmup || at >= c.Warmup+c.Trigger+300*time.Millisecond
		o.reported[i] = true
	}
	o.quota = quotaLog{First429: 10, Until: 20, Times: []int64{5, 10, 11, 19, 20, 25}}
	r := reduce(o)
	if r.RecoveredMs == nil || *r.RecoveredMs != 300 {
		t.Errorf("recovered %v, want 300 ms", r.RecoveredMs)
	}
	if r.Failed != 130 || r.Incident != 1 || r.Missing != 0 {
		t.Errorf("failed %d, incident %.2f requests per operation, %d missing; want 130, 1, 0", r.Failed, r.Incident, r.Missing)
	}
	if r.QuotaLeaks == nil || *r.QuotaLeaks != 2 {
		t.Errorf("quota leaks %v, want 2 (11 and 19)", r.QuotaLeaks)
	}
}
