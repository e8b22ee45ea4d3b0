package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrystack/retrystack/chaos"
	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/middleware"
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
		setup:  "one client with policy.Default() sends 600 GETs, 24 in flight, to a healthy server through chaos layers below the retry layer that answer 10 % of the attempts 503 in place of sending, reset 2 % after sending, and delay each by up to 2 ms. Each of the 24 senders has a chaos layer of its own, seeded with its number, and sends its 25 operations one after another: each operation meets the same faults every run, whatever the interleaving (one layer's seeded draws would go to whichever attempt came first). success_pct: the share that end 200, failed: how the others stopped; requests_per_op: what the server received per operation; attempts_per_op: the attempts the retry layer made per operation (the 503s included)",
		preset: "default",
		run:    func(t *trial) { loneConcurrent(t, 25, 24) },
		want:   expect{"-", "-", "-", "success_pct_over=99.5;requests_per_op_under=1.15"},
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
	var tl tally
	var wg sync.WaitGroup
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
				tl.add(status, rep, err)
			}
		})
	}
	wg.Wait()
	tl.record(t, clients*n)
}

// tally counts the operations of a lone row as they end: those that ended
// 200, the attempts their reports name, and how the others stopped.
type tally struct {
	mu       sync.Mutex
	ok       int
	attempts int
	stops    map[string]int
}

func (tl *tally) add(status int, rep *engine.Report, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if rep != nil {
		tl.attempts += len(rep.Attempts)
	}
	if err == nil && status == http.StatusOK {
		tl.ok++
		return
	}
	stop := "unknown"
	if rep != nil {
		stop = string(rep.Stop)
	}
	if tl.stops == nil {
		tl.stops = map[string]int{}
	}
	tl.stops[stop]++
}

// record puts the tally of ops operations in t's extra figures:
// success_pct, attempts_per_op and, when some failed, failed as
// "stop:n,stop:n".
func (tl *tally) record(t *trial, ops int) {
	t.extra["success_pct"] = fmt.Sprintf("%.2f", float64(tl.ok)*100/float64(ops))
	t.extra["attempts_per_op"] = fmt.Sprintf("%.2f", float64(tl.attempts)/float64(ops))
	if len(tl.stops) > 0 {
		var failed []string
		for _, k := range slices.Sorted(maps.Keys(tl.stops)) {
			failed = append(failed, k+":"+strconv.Itoa(tl.stops[k]))
		}
		t.extra["failed"] = strings.Join(failed, ",")
	}
}

// loneConcurrent sends n GETs on each of senders senders at once, each
// one after another, through the row's client (one retry layer, one
// budget) to the fault server's /s/200, each sender's attempts through a
// chaos layer of its own, seeded with its number; it records the share
// that ended 200, how the others stopped, and the requests the server
// received and the attempts the retry layer made per operation.
func loneConcurrent(t *trial, n, senders int) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	below := make([]http.RoundTripper, senders)
	for i := range below {
		below[i] = chaos.Layer(chaos.Config{Seed: uint64(i), Faults: []chaos.Fault{
			{Kind: chaos.Latency, Rate: 1, Jitter: 2 * time.Millisecond},
			{Kind: chaos.Status, Rate: 0.10, Status: http.StatusServiceUnavailable},
			{Kind: chaos.Reset, Rate: 0.02},
		}}).Wrap(tr)
	}
	rt, err := t.over(middleware.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return below[r.Context().Value(senderKey{}).(int)].RoundTrip(r)
	}))
	if err != nil {
		t.fail(err)
		return
	}
	c := &http.Client{Transport: rt, CheckRedirect: t.client.CheckRedirect}
	before := t.count()
	var tl tally
	var wg sync.WaitGroup
	for i := range senders {
		ctx := context.WithValue(t.ctx, senderKey{}, i)
		wg.Go(func() {
			for range n {
				status, _, rep, err := t.requestVia(ctx, c, http.MethodGet, t.url("/s/200"), nil)
				tl.add(status, rep, err)
			}
		})
	}
	wg.Wait()
	tl.record(t, senders*n)
	t.extra["requests_per_op"] = fmt.Sprintf("%.2f", float64(t.count()-before)/float64(senders*n))
}

// senderKey is the context key of loneConcurrent's sender number.
type senderKey struct{}
