package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A cell is one run of the fleet: a server, P client processes of M
// clients of one variant, an open-loop schedule.
type cell struct {
	Kind    string // overload, lone, quota, kill, kill-baseline (the row's name)
	Variant string // local, shared, go-retryablehttp, failsafe-go
	P, M    int
	Rate    float64 // the whole fleet's operations a second
	Path    string  // /work, /flaky or /quota
	// Warmup, Trigger (at TriggerCapacity; none when 0) and After are the
	// run, as overload.Experiment's; Grace is what an operation started
	// near the end has to finish.
	Warmup, Trigger, After, Grace time.Duration
	TriggerCapacity               float64
	AttemptTimeout                time.Duration
	// KillAt, when not 0, kills redis-server (SIGKILL) that long after the
	// start, and starts it again on its port RestartAfter later.
	KillAt, RestartAfter time.Duration
	Quota                int // /quota's requests a second
	Seed                 uint64
}

// N is the fleet's clients.
func (c cell) N() int { return c.P * c.M }

// total is how long operations are started.
func (c cell) total() time.Duration { return c.Warmup + c.Trigger + c.After }

// shared reports whether the cell's clients use Redis.
func (c cell) shared() bool { return c.Variant == "shared" }

// env is what every cell runs with.
type env struct {
	self  string       // this binary, for the children
	redis *redisServer // nil when no cell shares
	seq   int          // cells run so far: each shared cell has a Fleet name of its own
	// interval is the Fleets' exchange interval (FleetConfig.Interval):
	// how stale a process's view of the fleet's budget may be.
	interval time.Duration
}

// outcome is what a cell measured, before it is reduced to a row.
type outcome struct {
	cell     cell
	ok       []bool // by index in the fleet's schedule
	reported []bool // which operations a process reported (all, or the run is void)
	procs    int    // processes that reported
	attempts int64
	sharedAt int // processes whose Fleet shared at the end
	stats    serverStats
	quota    quotaLog
	events   []string
	// redisProcs is how many processes the fleet's Redis sorted set
	// counts (redis.FleetConfig.Name: key retrystack:fleet:{Name}:c):
	// proof that every process exchanged.
	redisProcs int64
	start      time.Time
}

// runCell runs c: it starts the server and the client processes, gives
// them a common start, times the trigger and the kill, collects every
// process's result and the server's counters, and stops them all.
func runCell(ctx context.Context, e *env, c cell) (outcome, error) {
	e.seq++
	res := outcome{cell: c}
	msgs := make(chan received, 64)
	srv, err := startChild(ctx, e.self, "server", msgs, "-role", "server",
		"-seed", strconv.FormatUint(c.Seed, 10), "-quota", strconv.Itoa(c.Quota))
	if err != nil {
		return res, err
	}
	defer srv.stop()
	addr, err := awaitAddr(ctx, msgs, srv)
	if err != nil {
		return res, err
	}
	fleetName := fmt.Sprintf("bench.%d.%d", os.Getpid(), e.seq)
	procs := make([]*child, c.P)
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stop()
			}
		}
	}()
	for i := range procs {
		args := []string{"-role", "clients", "-url", "http://" + addr + c.Path, "-variant", c.Variant,
			"-proc", strconv.Itoa(i), "-procs", strconv.Itoa(c.P), "-clients", strconv.Itoa(c.M),
			"-rate", strconv.FormatFloat(c.Rate, 'f', -1, 64), "-total", c.total().String(), "-grace", c.Grace.String(),
			"-attempt-timeout", c.AttemptTimeout.String()}
		if c.shared() {
			args = append(args, "-redis", e.redis.Addr(), "-fleet", fleetName, "-interval", e.interval.String())
		}
		if procs[i], err = startChild(ctx, e.self, fmt.Sprintf("clients %d", i), msgs, args...); err != nil {
			return res, err
		}
	}

	// Every process ready (its clients built, its Fleet sharing), then a
	// start a little ahead, the same wall-clock instant for all.
	var events []message
	if err := await(ctx, msgs, 30*time.Second, c.P, "ready", &events, nil); err != nil {
		return res, err
	}
	res.start = time.Now().Add(200 * time.Millisecond)
	if c.Trigger > 0 {
		q := fmt.Sprintf("start=%d&warmup=%s&trigger=%s&f=%g", res.start.UnixNano(), c.Warmup, c.Trigger, c.TriggerCapacity)
		if err := control(ctx, addr, http.MethodPost, "/control/schedule?"+q, nil); err != nil {
			return res, err
		}
	}
	for _, p := range procs {
		if err := p.send(goLine{Start: res.start.UnixNano()}); err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	killed := make(chan error, 1)
	if c.KillAt > 0 {
		go func() { killed <- killRedis(ctx, e.redis, res.start, c.KillAt, c.RestartAfter) }()
	} else {
		killed <- nil
	}

	n := int(c.Rate * c.total().Seconds())
	res.ok, res.reported = make([]bool, n), make([]bool, n)
	collect := func(m message) {
		res.procs++
		res.attempts += m.Attempts
		if m.Shared {
			res.sharedAt++
		}
		for k, i := range m.Index {
			if i >= 0 && i < n {
				res.ok[i], res.reported[i] = m.OK[k], true
			}
		}
	}
	if err := await(ctx, msgs, c.total()+c.Grace+30*time.Second, c.P, "result", &events, collect); err != nil {
		return res, err
	}
	if err := <-killed; err != nil {
		return res, err
	}
	for _, m := range events {
		res.events = append(res.events, describe(m, res.start))
	}
	if err := control(ctx, addr, http.MethodGet, "/control/stats", &res.stats); err != nil {
		return res, err
	}
	if c.Path == "/quota" {
		if err := control(ctx, addr, http.MethodGet, "/control/quota", &res.quota); err != nil {
			return res, err
		}
	}
	if c.shared() {
		rc := goredis.NewClient(&goredis.Options{Addr: e.redis.Addr()})
		defer rc.Close()
		res.redisProcs, _ = rc.ZCard(ctx, "retrystack:fleet:{"+fleetName+"}:c").Result()
	}
	return res, nil
}

// awaitAddr is the server's first line: its address.
func awaitAddr(ctx context.Context, msgs <-chan received, srv *child) (string, error) {
	var addr string
	var none []message
	err := await(ctx, msgs, 10*time.Second, 1, "addr", &none, func(m message) { addr = m.Addr })
	return addr, err
}

// await reads messages until want processes have sent one of type typ
// (each handed to each), keeping the events; a child that ends first, or
// a wait past timeout, is an error.
func await(ctx context.Context, msgs <-chan received, timeout time.Duration, want int, typ string, events *[]message, each func(message)) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	sent := map[*child]bool{}
	for got := 0; got < want; {
		select {
		case r := <-msgs:
			switch {
			case r.done && !sent[r.from]:
				return fmt.Errorf("%s ended before its %s line: %v", r.from.name, typ, r.err)
			case r.done: // its last line read: it may go
			case r.msg.Type == "event":
				fmt.Fprintf(os.Stderr, "fleet: process %d: %s %v\n", r.msg.Proc, r.msg.Name, r.msg.Attrs)
				*events = append(*events, r.msg)
			case r.msg.Type == typ:
				got++
				sent[r.from] = true
				if each != nil {
					each(r.msg)
				}
			default:
				return fmt.Errorf("%s: a %s line while waiting for %s", r.from.name, r.msg.Type, typ)
			}
		case <-t.C:
			return fmt.Errorf("%d of %d %s lines after %s", got, want, typ, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// describe is an event as the report prints it: the process, the time
// from the start, the name and attributes.
func describe(m message, start time.Time) string {
	s := fmt.Sprintf("p%d %+.2fs %s", m.Proc, time.Unix(0, m.At).Sub(start).Seconds(), m.Name)
	if et, ok := m.Attrs["error.type"]; ok {
		s += " (" + et + ")"
	}
	return s
}

// control calls one of the server's control endpoints, decoding its JSON
// answer into v (nil: none).
func control(ctx context.Context, addr, method, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server %s: %s", path, resp.Status)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// killRedis kills redis-server at start+at and starts it again on its
// port restart later: the fleet's processes lose it mid-run.
func killRedis(ctx context.Context, r *redisServer, start time.Time, at, restart time.Duration) error {
	if r == nil {
		return errors.New("a kill cell needs the redis-server")
	}
	if err := sleepUntil(ctx, start.Add(at)); err != nil {
		return err
	}
	r.kill()
	fmt.Fprintf(os.Stderr, "fleet: redis-server killed (SIGKILL) at %+.2fs\n", time.Since(start).Seconds())
	if err := sleepUntil(ctx, start.Add(at+restart)); err != nil {
		return err
	}
	err := r.start()
	fmt.Fprintf(os.Stderr, "fleet: redis-server restarted on port %d at %+.2fs\n", r.port, time.Since(start).Seconds())
	return err
}

// sleepUntil waits until t, or the context's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
