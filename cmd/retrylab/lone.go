package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/policy"
)

// The lone rows: a client that is alone (a command-line tool, an SDK
// wrapper) beside the fleet rows, where each client is one of many. From
// inside, the two look alike: policy.Default() keeps to the fleet's side
// and policy.Alone() is the choice a lone client makes (docs/fleet.md).
var loneRows = []scenario{
	{
		id:     "lone/stalls-1-per-second",
		setup:  "one client configured as alone (policy.Alone(), Policy.AttemptTimeout 200 ms) sends 400 GETs to a server that holds 5 % of the attempts unanswered until the client gives up and answers 5 % 503, chosen by a seeded draw per client, taken in the order of its attempts. Compressed: at 1 a second an operation ends long before the next starts, so the 400 are sent back to back, on 20 clients configured alike (20 each, the 20 at once): Alone's budget refills with successes, not with time, and a new client's is as full as a lone client's is between its operations (a retry that succeeds is paid back). success_pct: the share that end 200, failed: how the others stopped (policy.Default(): about 90 %, by design: it retries no timeout of a client this small; bench/cmd/compare -run lone has it at the real rate)",
		preset: "alone",
		tune:   func(p *policy.Policy) { p.AttemptTimeout = 200 * time.Millisecond },
		run:    func(t *trial) { loneStalls(t, 20, 20) },
		want:   expect{"-", "-", "-", "success_pct_over=99.5"},
	},
	{
		id:     "lone/concurrent-under-chaos",
		setup:  "one client with policy.Default() sends 600 GETs, 24 in flight, to a healthy server through a chaos layer below the retry layer (seed 1) that answers 10 % of the attempts 503 in place of sending, resets 2 % after sending, and delays each by up to 2 ms. success_pct: the share that end 200; requests_per_op: what the server received per operation; attempts_per_op: the attempts the retry layer made per operation (the 503s included)",
		preset: "default",
		stack:  []string{"redirect", "cookies", "retry", "chaos"},
		chaos: func(*trial) chaos.Config {
			return chaos.Config{Seed: 1, Faults: []chaos.Fault{
				{Kind: chaos.Latency, Rate: 1, Jitter: 2 * time.Millisecond},
				{Kind: chaos.Status, Rate: 0.10, Status: http.StatusServiceUnavailable},
				{Kind: chaos.Reset, Rate: 0.02},
			}}
		},
		run:  func(t *trial) { loneConcurrent(t, 600, 24) },
		want: expect{"-", "-", "-", "success_pct_over=99.5;requests_per_op_under=1.15"},
	},
	{
		id:     "lone/first-request-stalls",
		setup:  "a new client configured as alone (policy.Alone(), Policy.AttemptTimeout 200 ms), as a command-line program makes it; its first GET's first attempt is held unanswered until the client gives up, the second is answered 200 (GET /stall/1)",
		preset: "alone",
		tune:   func(p *policy.Policy) { p.AttemptTimeout = 200 * time.Millisecond },
		run:    func(t *trial) { t.send(http.MethodGet, "/stall/1", "") },
		want:   expect{"2", "200", "success", "-"},
	},
	{
		id:     "lone/new-client-two-operations",
		setup:  "a new client with policy.Default(): a HEAD answered 503, 503, 200, then a GET to the same host answered 503, 503, 200 (minio-go's StatObject then GetObject meeting a brief outage); the GET is the subject",
		preset: "default",
		run: func(t *trial) {
			t.do(http.MethodHead, "/fail/2/503", nil)
			t.do(http.MethodGet, "/fail/2/503?key="+t.key+"/get", nil)
			t.subject = 1
		},
		want: expect{"3,3", "200", "success", "-"},
	},
}

// loneStalls sends n GETs on each of clients clients of the row, one
// after another on each client and the clients at once, to a server that
// holds 5 % of the attempts until the client gives up and answers 5 %
// 503. Each client has a path of its own and the path its own seeded
// draw, taken in the order of its attempts, so the faults do not depend
// on how the clients interleave. It records the share that ended 200
// and how the others stopped.
func loneStalls(t *trial, clients, n int) {
	var mu sync.Mutex
	draws := map[string]*rand.Rand{} // written before the first request
	for i := range clients {
		draws["/client/"+strconv.Itoa(i)] = rand.New(rand.NewPCG(43, uint64(i)))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		d := draws[r.URL.Path]
		x := 1.0
		if d != nil {
			x = d.Float64()
		}
		mu.Unlock()
		switch {
		case x < 0.05:
			<-r.Context().Done() // held until the client gives up
		case x < 0.10:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var ok atomic.Int64
	var wg sync.WaitGroup
	stops := map[string]int{}
	for i := range clients {
		c, err := t.newClient()
		if err != nil {
			t.fail(err)
			return
		}
		path := "/client/" + strconv.Itoa(i)
		wg.Go(func() {
			defer c.CloseIdleConnections()
			for range n {
				status, _, rep, err := t.requestVia(t.ctx, c, http.MethodGet, srv.URL+path, nil)
				if err == nil && status == http.StatusOK {
					ok.Add(1)
					continue
				}
				stop := "unknown"
				if rep != nil {
					stop = string(rep.Stop)
				}
				mu.Lock()
				stops[stop]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.extra["success_pct"] = fmt.Sprintf("%.2f", float64(ok.Load())*100/float64(clients*n))
	if len(stops) > 0 {
		t.extra["failed"] = counts(stops)
	}
}

// counts is m as "key:n,key:n", in key order.
func counts(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+":"+strconv.Itoa(m[k]))
	}
	return strings.Join(out, ",")
}

// loneConcurrent sends n GETs through the row's client, inFlight at once,
// to the fault server's /s/200, and records the share that ended 200 and
// the requests the server received per operation.
func loneConcurrent(t *trial, n, inFlight int) {
	before := t.count()
	var ok, attempts atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				status, _, rep, err := t.request(t.ctx, http.MethodGet, "/s/200", nil)
				if err == nil && status == http.StatusOK {
					ok.Add(1)
				}
				if rep != nil {
					attempts.Add(int64(len(rep.Attempts)))
				}
			}
		})
	}
	wg.Wait()
	t.extra["success_pct"] = fmt.Sprintf("%.2f", float64(ok.Load())*100/float64(n))
	t.extra["requests_per_op"] = fmt.Sprintf("%.2f", float64(t.count()-before)/float64(n))
	t.extra["attempts_per_op"] = fmt.Sprintf("%.2f", float64(attempts.Load())/float64(n))
}
