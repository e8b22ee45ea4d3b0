package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/retrystack/retrystack/hedge"
)

// hedgeRows cut the slow tail with hedged requests, and never hedge what
// may not be sent twice.
var hedgeRows = []scenario{
	{
		id:     "hedge/slow-tail",
		alone:  true,
		setup:  "hedging layer inside the retry layer, one hedge after 50 ms; every 10th request takes 300 ms, the others 5 ms; 200 sequential GETs (SERVER: all they sent). p99_ms: the 99th percentile latency; extra_load_pct: requests beyond 200, in per cent",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "hedge"},
		hedge: hedge.Config{Delay: 50 * time.Millisecond},
		run: func(t *trial) {
			const n = 200
			before := t.count()
			latencies := make([]time.Duration, 0, n)
			for range n {
				start := time.Now()
				t.send("GET", "/slow/headers?every=10&delay=300ms&base=5ms", "")
				latencies = append(latencies, time.Since(start))
			}
			sent := t.count() - before
			last := t.ops[len(t.ops)-1]
			last.requests = sent // one figure for the table: every request the server saw
			t.ops, t.subject = []op{last}, 0
			slices.Sort(latencies)
			t.extra["p99_ms"] = strconv.FormatInt(latencies[n*99/100-1].Milliseconds(), 10)
			t.extra["extra_load_pct"] = fmt.Sprintf("%.1f", float64(sent-n)*100/n)
		},
		want: expect{"-", "200", "success", "p99_ms_under=120;extra_load_pct_under=15"},
	},
	{
		id:     "hedge/post-never-hedged",
		setup:  "the same hedging layer; one POST without an Idempotency-Key to a request that takes 300 ms",
		preset: "default", stack: []string{"redirect", "cookies", "retry", "hedge"},
		hedge: hedge.Config{Delay: 50 * time.Millisecond},
		run:   func(t *trial) { t.send("POST", "/slow/headers?delay=300ms", `{"item":1}`) },
		want:  expect{"1", "200", "success", "-"},
	},
}
