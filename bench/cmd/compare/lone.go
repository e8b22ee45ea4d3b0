package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sync"
	"text/tabwriter"

	"github.com/retrystack/retrystack/bench"
)

// The lone-client cells (issue 43), each run for every configuration of
// bench.LoneConfigs at once: the configurations share nothing but the
// machine (each has its own server, transports and budgets), and the load
// is light (at most 40 requests a second each), so running them side by
// side changes no timing that matters and keeps the cells to about
// 4 minutes in all instead of 40.
const (
	// loneOps are the operations of each stall cell: at 5 % stalls and
	// 5 % 503s, about 50 stalls and 50 503s.
	loneOps = 1000
	// loneSpan is how long a stall cell's schedule lasts: at rate r a
	// second the operations are spread over ceil(loneOps / (r · 25 s))
	// clients, each running its share at the real rate (one client at 40
	// a second; 40 clients of 25 operations at 1 a second).
	loneSpan = 25
	loneSeed = 43
)

// loneRates are the stall cells' rates, in requests a second per client.
var loneRates = []float64{1, 10, 20, 40}

// measureLone runs the lone cells for every configuration whose name libs
// matches, telling each row on w as it comes (a JSON line).
func measureLone(w io.Writer, libs *regexp.Regexp) ([]row, error) {
	var cfgs []bench.Overloader
	for _, c := range bench.LoneConfigs {
		if libs.MatchString(c.Name) {
			cfgs = append(cfgs, c)
		}
	}
	enc := json.NewEncoder(w)
	var rows []row
	cell := func(name string, rate float64, note string, run func(bench.Overloader) (bench.LoneResult, error)) error {
		res := make([]bench.LoneResult, len(cfgs))
		errs := make([]error, len(cfgs))
		var wg sync.WaitGroup
		for i, c := range cfgs {
			wg.Go(func() { res[i], errs[i] = run(c) })
		}
		wg.Wait()
		for i, c := range cfgs {
			if errs[i] != nil {
				return fmt.Errorf("%s, %s: %w", name, c.Name, errs[i])
			}
			r := res[i]
			rows = append(rows, row{Name: name, Lib: c.Name, Rate: rate, Clients: r.Clients, Note: note,
				Ops: ptr(r.Ops), Requests: ptr(r.Requests), Attempts: ptr(r.Attempts), Outcome: r.Outcome,
				SuccessPct: ptr(math.Round(r.SuccessPct()*10) / 10), PerOperation: ptr(math.Round(float64(r.Requests)/float64(r.Ops)*100) / 100)})
			enc.Encode(rows[len(rows)-1])
		}
		return nil
	}
	for _, rate := range loneRates {
		k := int(math.Ceil(loneOps / (rate * loneSpan)))
		note := fmt.Sprintf("%d clients × %d ops at %g/s each (compressed: one client would take %.0f s)", k, loneOps/k, rate, loneOps/rate)
		if k == 1 {
			note = fmt.Sprintf("1 client, %d ops at %g/s (real time)", loneOps, rate)
		}
		if err := cell("lone-stalls", rate, note, func(c bench.Overloader) (bench.LoneResult, error) {
			return bench.LoneStalls(c, rate, k, loneOps, 0.05, 0.05, loneSeed)
		}); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		name, note string
		run        func(bench.Overloader) (bench.LoneResult, error)
	}{
		{"lone-chaos", "600 GETs, 24 in flight; chaos below: 10 % 503, 2 % reset after sending, 30 % +1-10 ms",
			func(c bench.Overloader) (bench.LoneResult, error) { return bench.LoneChaos(c, 600, 24, loneSeed) }},
		{"lone-sdk", "new client: HEAD 503, 503, 200; then GET 503, 503, 200",
			func(c bench.Overloader) (bench.LoneResult, error) { return bench.LoneSDK(c) }},
		{"lone-first", "new client, 200 ms attempts: first attempt stalls, second 200",
			func(c bench.Overloader) (bench.LoneResult, error) { return bench.LoneFirst(c) }},
		{"lone-all-timeouts", "new client, every attempt stalls (200 ms attempts): 50 GETs at 10/s",
			func(c bench.Overloader) (bench.LoneResult, error) { return bench.LoneAllTimeouts(c, 50, 10) }},
	} {
		if err := cell(c.name, 0, c.note, c.run); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// printLone prints the lone cells, one table a cell.
func printLone(rows []row) {
	var tw *tabwriter.Writer
	last := ""
	for _, r := range rows {
		key := fmt.Sprintf("%s %g", r.Name, r.Rate)
		if key != last {
			if tw != nil {
				tw.Flush()
				fmt.Println()
			}
			last = key
			title := r.Name
			if r.Rate > 0 {
				title = fmt.Sprintf("%s at %g/s", r.Name, r.Rate)
			}
			fmt.Printf("%s: %s\n", title, r.Note)
			tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "config\tsucceed\trequests/op\trequests\tattempts\tfailures or outcome\t")
		}
		fmt.Fprintf(tw, "%s\t%.1f %%\t%.2f\t%d\t%d\t%s\t\n", r.Lib, *r.SuccessPct, *r.PerOperation, *r.Requests, *r.Attempts, r.Outcome)
	}
	if tw != nil {
		tw.Flush()
	}
}
