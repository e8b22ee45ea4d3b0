package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The coordinator: it reads the flags, plans the cells, starts
// redis-server when a cell shares, runs the cells one after another (one
// JSON line each on stdout as it ends), and prints the table.

// options are the coordinator's flags.
type options struct {
	cells, variants []string
	clients         []int
	rates           []float64
	procs           int
	warmup, after   time.Duration
	loneDuration    time.Duration
	redisServer     string
	interval        time.Duration
}

func coordinatorMain(args []string) int {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	cells := fs.String("cells", "overload,lone,quota,kill", "cells to run: overload, lone, quota, kill")
	variants := fs.String("variants", "local,shared,go-retryablehttp,failsafe-go", "the overload cells' variants")
	clients := fs.String("clients", "10,100,1000", "the overload cells' fleet sizes N")
	rates := fs.String("rates", "600,900", "the overload cells' operations a second")
	var o options
	fs.IntVar(&o.procs, "procs", 10, "the overload cells' processes P (each runs N/P clients)")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "the overload cells' warm-up at the real rate (the budget's window is 1 s)")
	fs.DurationVar(&o.after, "after", 8*time.Second, "the overload cells' run after the trigger")
	fs.DurationVar(&o.loneDuration, "lone-duration", time.Minute, "the lone cells' run")
	fs.StringVar(&o.redisServer, "redis-server", "redis-server", "the redis-server binary")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "the shared variants' Fleet exchange interval (redis.FleetConfig.Interval)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.cells, o.variants = split(*cells), split(*variants)
	for _, f := range split(*clients) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet: -clients: %q is not a count\n", f)
			return 2
		}
		o.clients = append(o.clients, n)
	}
	for _, f := range split(*rates) {
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || !(r > 0) {
			fmt.Fprintf(os.Stderr, "fleet: -rates: %q is not a rate\n", f)
			return 2
		}
		o.rates = append(o.rates, r)
	}
	plan, err := planCells(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	// Interrupted, the coordinator's context ends, and with it every
	// child (exec.CommandContext kills its process group).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := runCells(ctx, self, o.redisServer, o.interval, plan, os.Stdout)
	if len(rows) > 0 {
		fmt.Println()
		printTable(os.Stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	return 0
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// The fixed parts of the cells: the in-process experiment's trigger and
// attempt timeout; the lone and quota fleets.
const (
	triggerTime     = time.Second
	triggerCapacity = 0.4
	overloadTimeout = 500 * time.Millisecond // bench's metaAttempt
	loneTimeout     = 200 * time.Millisecond // bench's loneTimeout
	smallFleet      = 20                     // processes of one client: the lone and quota cells
	quotaPerSecond  = 10                     // /quota's limit: half the quota fleet's rate
)

// planCells lists the cells the options select, in the order they run.
func planCells(o options) ([]cell, error) {
	var plan []cell
	for _, name := range o.cells {
		switch name {
		case "overload":
			for _, rate := range o.rates {
				for _, n := range o.clients {
					for _, v := range o.variants {
						if v != "local" && v != "shared" && peerVariants[v] == "" {
							return nil, fmt.Errorf("-variants: no variant %q (local, shared, go-retryablehttp, failsafe-go)", v)
						}
						plan = append(plan, overloadCell(v, n, o.procs, rate, o.warmup, o.after))
					}
				}
			}
		case "lone":
			for _, v := range []string{"local", "shared"} {
				plan = append(plan, cell{Kind: "lone", Variant: v, P: smallFleet, M: 1, Rate: smallFleet, Path: "/flaky",
					After: o.loneDuration, Grace: 2 * time.Second, AttemptTimeout: loneTimeout, Seed: 1})
			}
		case "quota":
			for _, v := range []string{"local", "shared"} {
				plan = append(plan, cell{Kind: "quota", Variant: v, P: smallFleet, M: 1, Rate: smallFleet, Path: "/quota",
					After: 15 * time.Second, Grace: time.Second, AttemptTimeout: overloadTimeout, Quota: quotaPerSecond})
			}
		case "kill":
			// Without the trigger, Redis dies in the middle of the run;
			// with it, half a second before the trigger, so that the whole
			// trigger runs on the processes' local budgets and the
			// restarted Redis (empty) has to be filled again after it.
			for _, trig := range []bool{false, true} {
				c := overloadCell("shared", 100, o.procs, 600, o.warmup, o.after)
				c.Kind, c.KillAt = "kill", c.total()/2
				if trig {
					c.Kind, c.KillAt = "kill+trigger", o.warmup-500*time.Millisecond
				} else {
					c.Trigger = 0
				}
				c.RestartAfter = 2 * time.Second
				base := c
				base.Kind, base.KillAt, base.RestartAfter = c.Kind+"-baseline", 0, 0
				plan = append(plan, base, c)
			}
		default:
			return nil, fmt.Errorf("-cells: no cell %q (overload, lone, quota, kill)", name)
		}
	}
	return plan, nil
}

// overloadCell is the in-process fleet experiment's cell (bench.Fleet) in
// processes: n clients over procs processes (fewer when n is smaller), a
// warm-up at the real rate, the 1 s trigger at 40 %, after.
func overloadCell(variant string, n, procs int, rate float64, warmup, after time.Duration) cell {
	p := min(procs, n)
	return cell{Kind: "overload", Variant: variant, P: p, M: max(n/p, 1), Rate: rate, Path: "/work",
		Warmup: warmup, Trigger: triggerTime, After: after, Grace: overloadTimeout,
		TriggerCapacity: triggerCapacity, AttemptTimeout: overloadTimeout}
}

// runCells runs the plan, writing each row on w as a JSON line as it
// ends; with an error, the rows so far.
func runCells(ctx context.Context, self, redisBin string, interval time.Duration, plan []cell, w io.Writer) ([]row, error) {
	e := &env{self: self, interval: interval}
	if slices.ContainsFunc(plan, cell.shared) {
		r, err := startRedis(ctx, redisBin)
		if err != nil {
			return nil, err
		}
		defer r.stop()
		e.redis = r
	}
	enc := json.NewEncoder(w)
	var rows []row
	for i, c := range plan {
		fmt.Fprintf(os.Stderr, "fleet: cell %d/%d: %s %s N=%d (P=%d×M=%d) %.0f ops/s, %s\n",
			i+1, len(plan), c.Kind, c.Variant, c.N(), c.P, c.M, c.Rate, c.total()+c.Grace)
		o, err := runCell(ctx, e, c)
		if err != nil {
			return rows, fmt.Errorf("cell %s %s N=%d %.0f/s: %w", c.Kind, c.Variant, c.N(), c.Rate, err)
		}
		r := reduce(o)
		var baseline *row
		if strings.HasPrefix(r.Cell, "kill") && len(rows) > 0 && rows[len(rows)-1].Cell == r.Cell+"-baseline" {
			baseline = &rows[len(rows)-1]
		}
		judge(&r, baseline)
		rows = append(rows, r)
		enc.Encode(r)
	}
	return rows, nil
}
