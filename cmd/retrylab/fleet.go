package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/overload"
	"github.com/retrystack/retrystack/policy"
)

// The fleet experiment, compressed: the overload/ rows' service and
// trigger, the load split over independent clients (each built as a
// process of its own builds it: its own budget, throttle and pacing
// state). Every client has run a full budget window before the trigger:
// 10 s of its share of the load, sent back to back before the run and
// answered at once (overload.Experiment.Credit), so it holds the credit 10
// s would have left it, in no time. Then 500 ms of warm-up (with the
// trigger's first half second, before any attempt can time out, it ages
// that credit out of the last second, where a timeout's retry would find
// it: compressed, it is all one instant), the 1 s trigger, only as long
// after it as the row's limit needs (a recovery later than the run reads
// as never: the rows can only look worse for it), and an attempt's
// timeout for the last operations to finish. The bench module's compare
// -run fleet runs 10 s after, and the peers beside.
func fleetRun(t *trial, clients int, rate float64, after time.Duration) {
	svc := overload.NewService(workers, serviceTime)
	defer svc.Close()
	fleet, ok := t.fleet(clients, svc)
	if !ok {
		return
	}
	e := overload.Experiment{
		Rate: rate, Warmup: 500 * time.Millisecond, Trigger: time.Second, After: after,
		TriggerCapacity: 0.4, Grace: attemptTime, Credit: 10 * time.Second,
	}
	r := e.Run(overload.Fleet(fleet), svc)
	t.extra["recovered_ms"] = "10000"
	if r.Recovered >= 0 {
		t.extra["recovered_ms"] = strconv.FormatInt(r.Recovered.Milliseconds(), 10)
	}
	t.extra["requests_per_op"] = fmt.Sprintf("%.2f", r.Incident)
}

// fleet builds n clients of the row over base, each as a process of its
// own would; false (the row marked as not run) if one cannot be built.
func (t *trial) fleet(n int, base http.RoundTripper) ([]http.RoundTripper, bool) {
	fleet := make([]http.RoundTripper, n)
	for i := range fleet {
		rt, err := t.over(base)
		if err != nil {
			t.fail(err)
			return nil, false
		}
		fleet[i] = rt
	}
	return fleet, true
}

// fleetRow is a row of the fleet experiment: clients sharing rate
// operations a second, run for after the trigger.
func fleetRow(id, setup string, clients int, rate float64, after time.Duration, limits string) scenario {
	return scenario{
		id: id, alone: true, setup: setup + fmt.Sprintf(fleetSetup, strings.TrimSuffix(after.String(), "s")+" s"),
		preset: "default", tune: func(p *policy.Policy) { p.AttemptTimeout = attemptTime },
		run:  func(t *trial) { fleetRun(t, clients, rate, after) },
		want: expect{"-", "-", "-", limits},
	}
}

const fleetSetup = "; compressed: each client's 10 s of warm-up is sent back to back before the run, answered at once, then 500 ms of warm-up, the 1 s trigger and %s after it (and 500 ms for the last operations to finish); requests_per_op counts from the trigger's start to the run's end"

var fleetRows = []scenario{
	fleetRow("fleet/defaults-1-client", "one client with policy.Default() (AttemptTimeout 500 ms), an open load of 600 operations a second against the overload/ rows' service (1 000 a second); a trigger drops capacity to 40 % for 1 s; the client has run a full budget window before the trigger. recovered_ms: from the trigger's end to the first 100 ms from which goodput stays at 90 % of the goodput before (10000: never)",
		1, 600, time.Second, "recovered_ms_under=1000"),
	fleetRow("fleet/defaults-100-clients", "the same load (600 a second) split evenly over 100 independent clients, each with its own policy.Default() and its own budget",
		100, 600, time.Second, "recovered_ms_under=1000;requests_per_op_under=1.3"),
	fleetRow("fleet/defaults-1000-clients", "the same with 1 000 clients of 0.6 operations a second each",
		1000, 600, time.Second, "recovered_ms_under=1000;requests_per_op_under=1.3"),
	fleetRow("fleet/defaults-10000-clients", "the same with 10 000 clients of 0.06 operations a second each",
		10000, 600, time.Second, "recovered_ms_under=1000;requests_per_op_under=1.3"),
	fleetRow("fleet/defaults-100-clients-900", "100 clients with policy.Default() sharing 900 operations a second (spare capacity 100 a second); a fleet that never retries recovers in about 2.5 s here",
		100, 900, 3100*time.Millisecond, "recovered_ms_under=3000"),
	{
		id:     "fleet/small-clients-keep-retrying", // counts, not time: it runs beside other rows
		setup:  "1 000 clients with policy.Default() against a healthy service that answers 1 % of requests, at random, 503; each client runs 6 operations (its share of a 10 s budget window at 0.6 a second), then 30 more, back to back (compressed time: Default's budget does not refill with time). success_pct: the share of the 30 000 that end 200 (99 % without retries); RESULT: what most of them end with",
		preset: "default",
		run: func(t *trial) {
			fleet, built := t.fleet(1000, overload.Flaky(0.01, 1))
			if !built {
				return
			}
			ok := overload.Healthy(fleet, 6, 30)
			t.extra["success_pct"] = fmt.Sprintf("%.2f", ok*100)
			most := op{result: "503"}
			if ok > 0.5 {
				most.result = "200"
			}
			t.ops = append(t.ops, most)
		},
		want: expect{"-", "200", "-", "success_pct_over=99.9"},
	},
}
