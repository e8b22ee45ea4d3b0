package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrystack/retrystack"
	"github.com/retrystack/retrystack/bench"
	"github.com/retrystack/retrystack/middleware"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/stores/redis"
)

// The clients role: one process of the fleet, with M clients of one
// variant, each its own retry stack (its own engine, budget, pacing,
// breaker) over the process's one http.Transport, as M independent
// clients of one service in one process would be. The process runs its
// share of the fleet's open-loop schedule: operation i (0 ≤ i < rate ·
// total) starts i/rate after the start, whatever the others do, in process
// i mod P, on its client (i mod N) / P; so every client of the fleet
// carries an even share, as overload.Fleet spreads operations.

// Variants: each client with its own policy.Default() budget (local); one
// redis.Fleet a process as every client's budget and pacer (shared); the
// peers as bench.FleetLibs builds them, guarded as there.
var peerVariants = map[string]string{
	"go-retryablehttp": "go-retryablehttp", // it ships no guard
	"failsafe-go":      "failsafe-go (budget, breaker)",
}

// clientConfig is what a client process is told on its command line.
type clientConfig struct {
	url, variant         string
	proc, procs, perProc int
	rate                 float64
	total, grace         time.Duration
	attemptTimeout       time.Duration
	redisAddr, fleet     string
	interval             time.Duration // the Fleet's exchange
}

func clientsMain(args []string) int {
	var c clientConfig
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	fs.StringVar(&c.url, "url", "", "the service's URL")
	fs.StringVar(&c.variant, "variant", "local", "local, shared, go-retryablehttp or failsafe-go")
	fs.IntVar(&c.proc, "proc", 0, "this process's index, from 0")
	fs.IntVar(&c.procs, "procs", 1, "the fleet's processes (P)")
	fs.IntVar(&c.perProc, "clients", 1, "clients in this process (M)")
	fs.Float64Var(&c.rate, "rate", 1, "the whole fleet's operations a second")
	fs.DurationVar(&c.total, "total", 10*time.Second, "how long operations are started")
	fs.DurationVar(&c.grace, "grace", 500*time.Millisecond, "how long after the last start operations may finish")
	fs.DurationVar(&c.attemptTimeout, "attempt-timeout", 500*time.Millisecond, "each attempt's timeout")
	fs.StringVar(&c.redisAddr, "redis", "", "redis-server address (shared)")
	fs.StringVar(&c.fleet, "fleet", "", "the Fleet's name (shared)")
	fs.DurationVar(&c.interval, "interval", 100*time.Millisecond, "the Fleet's exchange interval (shared)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetPrefix(fmt.Sprintf("fleet clients %d: ", c.proc))
	if err := runClients(c); err != nil {
		log.Print(err)
		return 1
	}
	return 0
}

// out is the process's stdout, one JSON line at a time: the fleet's
// observer writes from its exchange goroutine.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) send(m message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enc.Encode(m)
}

// observer tells the coordinator the Fleet's events as they happen.
type observer struct {
	out  *out
	proc int
}

func (o observer) Observe(e middleware.Event) {
	attrs := map[string]string{}
	for _, kv := range e.Attrs {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	o.out.send(message{Type: "event", Proc: o.proc, Name: e.Name, At: time.Now().UnixNano(), Attrs: attrs})
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// counting counts the requests sent through it: the attempts of every
// client of the process, below their retry layers.
type counting struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

func runClients(c clientConfig) error {
	o := &out{enc: json.NewEncoder(os.Stdout)}
	// One transport a process: each client keeps its own retry state, the
	// connections are the process's (as http.DefaultTransport would be).
	// Its pool of idle connections is large enough never to make a
	// process dial again under load: at 900 operations a second over 10
	// processes, attempts of 500 ms at most and 3 attempts an operation,
	// a process has under 150 attempts in flight.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	base := &counting{next: tr}

	var fleet *redis.Fleet
	if c.variant == "shared" {
		// go-redis logs every failed dial; while Redis is down (the kill
		// cell) that is thousands of lines. The Fleet's events say what
		// matters: when the process stopped sharing and when it shared
		// again.
		goredis.SetLogger(quiet{})
		rc := goredis.NewClient(&goredis.Options{Addr: c.redisAddr})
		defer rc.Close()
		var err error
		fleet, err = redis.NewFleet(rc, redis.FleetConfig{Name: c.fleet, Interval: c.interval, Observer: observer{o, c.proc}})
		if err != nil {
			return err
		}
		defer fleet.Close()
		// Ready once the fleet shares: the first exchange is under way.
		for deadline := time.Now().Add(5 * time.Second); !fleet.Sharing(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("the Fleet did not share within 5 s of its start")
			}
		}
	}
	clients := make([]http.RoundTripper, c.perProc)
	for i := range clients {
		rt, err := newClient(c, base, fleet)
		if err != nil {
			return err
		}
		clients[i] = rt
	}
	o.send(message{Type: "ready", Proc: c.proc})

	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	var g goLine
	if err := json.Unmarshal(line, &g); err != nil {
		return fmt.Errorf("the start line %q: %w", line, err)
	}
	go func() { // the coordinator has gone: so does the process
		io.Copy(io.Discard, in)
		os.Exit(3)
	}()

	index, ok := run(c, clients, time.Unix(0, g.Start))
	res := message{Type: "result", Proc: c.proc, Index: index, OK: ok, Attempts: base.n.Load()}
	if fleet != nil {
		res.Shared = fleet.Sharing()
	}
	o.send(res)
	return nil
}

// newClient is one client of the variant over base.
func newClient(c clientConfig, base http.RoundTripper, fleet *redis.Fleet) (http.RoundTripper, error) {
	switch c.variant {
	case "local", "shared":
		p := policy.Default() // a budget of its own, new with each call
		p.AttemptTimeout = c.attemptTimeout
		if fleet != nil {
			p.Budget = fleet
			p.RetryAfter.Shared = fleet
		}
		return retrystack.NewTransport(retrystack.Config{Policy: &p, Transport: base})
	}
	name, ok := peerVariants[c.variant]
	if !ok {
		return nil, fmt.Errorf("no variant %q", c.variant)
	}
	for _, lib := range bench.FleetLibs {
		if lib.Name == name {
			return lib.New(base, c.attemptTimeout)
		}
	}
	return nil, fmt.Errorf("bench.FleetLibs has no %q", name)
}

// run starts this process's operations on the fleet's schedule from
// start, gives them until the end plus grace to finish (what has not
// succeeded by then failed, as in overload.Experiment.Run), and returns
// each one's index and outcome.
func run(c clientConfig, clients []http.RoundTripper, start time.Time) ([]int, []bool) {
	n := int(c.rate * c.total.Seconds())
	fleetSize := c.procs * c.perProc
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(c.total+c.grace))
	defer cancel()
	var index []int
	for i := c.proc; i < n; i += c.procs {
		index = append(index, i)
	}
	ok := make([]bool, len(index))
	var wg sync.WaitGroup
	for k, i := range index {
		at := time.Duration(float64(i) / c.rate * float64(time.Second))
		if d := time.Until(start.Add(at)); d > 0 {
			time.Sleep(d) // the open-loop schedule
		}
		client := clients[(i%fleetSize)/c.procs]
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
			resp, err := client.RoundTrip(req)
			if err != nil {
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok[k] = err == nil && resp.StatusCode == http.StatusOK
		})
	}
	wg.Wait() // every operation ends by the deadline
	return index, ok
}
