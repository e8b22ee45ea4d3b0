package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrystack/retrystack/internal/testkit/overload"
)

// A row is what the report says of a cell: one JSON line, one line of the
// table. The goodput and recovery are overload.Experiment.Run's, over
// the operations of every process merged by their place in the schedule.
type row struct {
	Cell    string  `json:"cell"`
	Variant string  `json:"variant"`
	N       int     `json:"clients"`
	P       int     `json:"processes"`
	Rate    float64 `json:"rate"`

	Ops        int     `json:"ops"`
	Missing    int     `json:"missing,omitempty"` // operations no process reported: a void run
	Failed     int     `json:"failed"`
	SuccessPct float64 `json:"success_pct"`
	// Requests is what the server received; PerOp per operation started,
	// Incident per operation from the trigger's start to
	// overload.IncidentSpan after its end (the server's counter).
	Requests  int64   `json:"requests"`
	Attempts  int64   `json:"attempts"` // what the clients sent
	PerOp     float64 `json:"requests_per_op"`
	Incident  float64 `json:"incident_requests_per_op,omitempty"`
	WastedPct float64 `json:"wasted_pct"`

	// Before is the warm-up's success share; GoodputAfterPct the mean
	// goodput of the 5 s after the trigger; RecoveredMs the time from the
	// trigger's end until every later 100 ms bucket's goodput is 90 % of
	// Before or more (nil: never, within the run).
	Before          float64   `json:"before,omitempty"`
	GoodputAfterPct float64   `json:"goodput_after_pct,omitempty"`
	RecoveredMs     *float64  `json:"recovered_ms,omitempty"`
	Goodput         []float64 `json:"goodput,omitempty"`

	// QuotaLeaks is the requests /quota received after its first 429 and
	// before that 429's Retry-After ended.
	QuotaLeaks *int `json:"quota_leaks,omitempty"`

	// Processes that reported, whose Fleet shared at the end, and that
	// Redis counted in the fleet; the Fleets' events.
	Reported    int      `json:"reported"`
	SharedAtEnd int      `json:"shared_at_end,omitempty"`
	RedisProcs  int64    `json:"redis_processes,omitempty"`
	Events      []string `json:"events,omitempty"`

	Target string `json:"target,omitempty"`
	Pass   *bool  `json:"pass,omitempty"`
}

const bucket = 100 * time.Millisecond

// reduce makes a cell's outcome a row.
func reduce(o outcome) row {
	c := o.cell
	r := row{Cell: c.Kind, Variant: c.Variant, N: c.N(), P: c.P, Rate: c.Rate, Ops: len(o.ok),
		Requests: o.stats.Requests, Attempts: o.attempts, Reported: o.procs, SharedAtEnd: o.sharedAt,
		RedisProcs: o.redisProcs, Events: o.events}
	okOps := 0
	for i, ok := range o.ok {
		if ok {
			okOps++
		}
		if !o.reported[i] {
			r.Missing++
		}
	}
	r.Failed = r.Ops - okOps
	r.SuccessPct = round(float64(okOps)*100/float64(max(r.Ops, 1)), 2)
	r.PerOp = round(float64(o.stats.Requests)/float64(max(r.Ops, 1)), 2)
	if o.stats.Requests > 0 {
		r.WastedPct = round(float64(o.stats.Wasted)*100/float64(o.stats.Requests), 1)
	}
	if c.Trigger > 0 {
		goodput(&r, o)
	}
	if c.Path == "/quota" {
		leaks := 0
		for _, t := range o.quota.Times {
			if t > o.quota.First429 && t < o.quota.Until && o.quota.First429 != 0 {
				leaks++
			}
		}
		r.QuotaLeaks = &leaks
	}
	return r
}

// goodput computes the goodput series, Before, the goodput after, the
// recovery and the incident's requests per operation, as
// overload.Experiment.Run does.
func goodput(r *row, o outcome) {
	c := o.cell
	total := c.total()
	buckets := int((total + bucket - 1) / bucket)
	started, ok := make([]int, buckets), make([]int, buckets)
	before, beforeOK, incident := 0, 0, 0
	incidentEnd := c.Warmup + c.Trigger + overload.IncidentSpan
	for i, okOp := range o.ok {
		at := time.Duration(float64(i) / c.Rate * float64(time.Second))
		b := min(int(at/bucket), buckets-1)
		started[b]++
		if okOp {
			ok[b]++
		}
		if at < c.Warmup {
			before++
			if okOp {
				beforeOK++
			}
		}
		if at >= c.Warmup && at < incidentEnd {
			incident++
		}
	}
	r.Goodput = make([]float64, buckets)
	for b := range buckets {
		if started[b] > 0 {
			r.Goodput[b] = round(float64(ok[b])/float64(started[b]), 3)
		}
	}
	r.Before = 1
	if before > 0 {
		r.Before = round(float64(beforeOK)/float64(before), 4)
	}
	end := int((c.Warmup + c.Trigger) / bucket)
	span := min(int(overload.IncidentSpan/bucket), buckets-end)
	sum := 0.0
	for _, g := range r.Goodput[end : end+span] {
		sum += g
	}
	r.GoodputAfterPct = round(sum/float64(max(span, 1))*100, 1)
	recovered := time.Duration(-1)
	for b := buckets - 1; b >= end && r.Goodput[b] >= 0.9*r.Before; b-- {
		recovered = time.Duration(b)*bucket - (c.Warmup + c.Trigger)
	}
	if recovered >= 0 {
		r.RecoveredMs = ptr(float64(recovered.Milliseconds()))
	}
	atEnd := o.stats.AtIncidentEnd
	if atEnd < 0 {
		atEnd = o.stats.Requests // the run ended before the incident's span did
	}
	if incident > 0 && o.stats.AtTrigger >= 0 {
		r.Incident = round(float64(atEnd-o.stats.AtTrigger)/float64(incident), 2)
	}
}

// judge sets the row's target and whether it holds. baseline is the
// kill cell's run without the kill.
func judge(r *row, baseline *row) {
	switch {
	case r.Cell == "overload" && r.Variant == "shared":
		limit := 1000.0
		if r.Rate >= 900 {
			limit = 3000
		}
		r.Target = fmt.Sprintf("recovered ≤ %.0f ms", limit)
		r.Pass = ptr(r.RecoveredMs != nil && *r.RecoveredMs <= limit)
	case r.Cell == "lone" && r.Variant == "shared":
		r.Target = "success ≥ 99.5 %"
		r.Pass = ptr(r.SuccessPct >= 99.5)
	case r.Cell == "quota" && r.Variant == "shared":
		r.Target = fmt.Sprintf("leaks < %d", r.P)
		r.Pass = ptr(r.QuotaLeaks != nil && *r.QuotaLeaks < r.P)
	case strings.HasPrefix(r.Cell, "kill") && !strings.HasSuffix(r.Cell, "-baseline") && baseline != nil:
		// Under a trigger, runs alike differ by a few dozen failures (the
		// overload cells' local rows: 403 to 429 of 7 200); without one, a
		// failure is the kill's.
		slack := 0
		if baseline.RecoveredMs != nil {
			slack = r.Ops / 100
		}
		r.Target = fmt.Sprintf("failed ≤ %d (the run without the kill, + %d)", baseline.Failed+slack, slack)
		r.Pass = ptr(r.Failed <= baseline.Failed+slack)
	}
}

// printTable writes the rows as a table, then each target's verdict.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cell\tvariant\tN\tP\tops/s\tsuccess\tgoodput 5 s after\trecovered\treq/op (incident)\treq/op (run)\twasted\tquota leaks\tfailed\tfleet events\tshared/redis\ttarget\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.2f %%\t%s\t%s\t%s\t%.2f\t%.0f %%\t%s\t%d\t%d\t%s\t%s\t\n",
			r.Cell, r.Variant, r.N, r.P, r.Rate, r.SuccessPct, orDash(r.GoodputAfterPct > 0 || r.Goodput != nil, fmt.Sprintf("%.0f %%", r.GoodputAfterPct)),
			recovered(r), orDash(r.Goodput != nil, fmt.Sprintf("%.2f", r.Incident)), r.PerOp, r.WastedPct,
			orDash(r.QuotaLeaks != nil, fmt.Sprint(deref(r.QuotaLeaks))), r.Failed, len(r.Events),
			orDash(r.Variant == "shared", fmt.Sprintf("%d/%d", r.SharedAtEnd, r.RedisProcs)), verdict(r))
	}
	tw.Flush()
}

func recovered(r row) string {
	switch {
	case r.Goodput == nil:
		return "-"
	case r.RecoveredMs == nil:
		return "never"
	}
	return fmt.Sprintf("%.0f ms", *r.RecoveredMs)
}

func verdict(r row) string {
	if r.Pass == nil {
		return ""
	}
	if *r.Pass {
		return "PASS " + r.Target
	}
	return "FAIL " + r.Target
}

func orDash(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func round(v float64, places int) float64 {
	f := math.Pow(10, float64(places))
	return math.Round(v*f) / f
}
