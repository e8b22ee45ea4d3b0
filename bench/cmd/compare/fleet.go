package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrystack/retrystack/bench"
	"github.com/retrystack/retrystack/internal/testkit/overload"
)

// fleetOptions are the fleet experiment's cells: clients, rates and
// warm-ups (-clients, -rates, -warmups).
type fleetOptions struct {
	clients []int
	rates   []float64
	warmups []bench.FleetWarmup
}

// The fleet experiment's cells by default.
var defaultFleet = fleetOptions{
	clients: []int{1, 10, 100, 1000, 10000},
	rates:   []float64{600, 900},
	warmups: []bench.FleetWarmup{bench.WarmRealTime, bench.WarmCompressed, bench.WarmShort},
}

// measureFleet runs every cell for every client library whose name libs
// matches: after a full window of warm-up at the real rate (about 23 s a
// cell) and compressed (about 13 s), and, for retrystack's rules only,
// after the 1 s warm-up alone; then the small clients against random
// failures. It tells each row on w as it comes (a JSON line), so that a
// long run that stops keeps what it measured.
func measureFleet(w io.Writer, libs *regexp.Regexp, o fleetOptions) ([]row, error) {
	var rows []row
	enc := json.NewEncoder(w)
	for _, warm := range o.warmups {
		for _, rate := range o.rates {
			for _, n := range o.clients {
				for _, lib := range bench.FleetLibs {
					if !libs.MatchString(lib.Name) {
						continue
					}
					if warm == bench.WarmShort && !slices.ContainsFunc(bench.Rules, func(r bench.Overloader) bool { return r.Name == lib.Name }) {
						continue // the 1 s warm-up: retrystack's budgets only
					}
					e := bench.FleetExperiment(rate, warm)
					res, err := bench.Fleet(lib, n, e)
					if err != nil {
						return nil, err
					}
					rows = append(rows, fleetRow(lib.Name, n, rate, string(warm), e, res))
					enc.Encode(rows[len(rows)-1])
				}
			}
		}
	}
	for _, lib := range bench.FleetLibs {
		if !libs.MatchString(lib.Name) {
			continue
		}
		ok, err := bench.SmallClients(lib, 1000, 6, 30, 0.01, 1)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Name: "fleet-small-clients", Lib: lib.Name, Clients: 1000, Warmup: "6 operations", SuccessPct: ptr(math.Round(ok*10000) / 100)})
		enc.Encode(rows[len(rows)-1])
	}
	return rows, nil
}

// parseFleet reads -clients, -rates and -warmups: comma-separated lists,
// "" for the default's.
func parseFleet(clients, rates, warmups string) (fleetOptions, error) {
	o := defaultFleet
	if clients != "" {
		o.clients = nil
		for f := range strings.SplitSeq(clients, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return o, fmt.Errorf("-clients: %q is not a count of clients", f)
			}
			o.clients = append(o.clients, n)
		}
	}
	if rates != "" {
		o.rates = nil
		for f := range strings.SplitSeq(rates, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(r > 0) {
				return o, fmt.Errorf("-rates: %q is not a rate", f)
			}
			o.rates = append(o.rates, r)
		}
	}
	if warmups != "" {
		o.warmups = nil
		names := map[string]bench.FleetWarmup{"real": bench.WarmRealTime, "compressed": bench.WarmCompressed, "1s": bench.WarmShort}
		for f := range strings.SplitSeq(warmups, ",") {
			w, ok := names[strings.TrimSpace(f)]
			if !ok {
				return o, fmt.Errorf("-warmups: %q is none of real, compressed, 1s", f)
			}
			o.warmups = append(o.warmups, w)
		}
	}
	return o, nil
}

func fleetRow(lib string, n int, rate float64, warm string, e overload.Experiment, res overload.Result) row {
	r := row{Name: "fleet", Lib: lib, Clients: n, Rate: rate, Warmup: warm,
		PerOperation: ptr(math.Round(res.Incident*100) / 100), WastedPct: ptr(math.Round(res.Wasted * 100)), Goodput: res.Goodput}
	// Goodput in the 5 s after the trigger: each bucket holds as many
	// operations (an open load), so the mean of the buckets' shares.
	start := int((e.Warmup + e.Trigger) / (100 * time.Millisecond))
	sum := 0.0
	for _, g := range res.Goodput[start : start+50] {
		sum += g
	}
	r.GoodputAfterPct = ptr(math.Round(sum / 50 * 100))
	if res.Recovered >= 0 {
		r.RecoveredMs = ptr(ms(res.Recovered))
	}
	return r
}

func printFleet(rows []row) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fleet\tclient\tclients\tops/s\twarm-up\tgoodput 5 s after\trecovered after\trequests per op\twasted work\t")
	for _, r := range rows {
		if r.SuccessPct != nil {
			continue
		}
		recovered := "never (10 s)"
		if r.RecoveredMs != nil {
			recovered = fmt.Sprintf("%.0f ms", *r.RecoveredMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%.0f %%\t%s\t%.2f\t%.0f %%\t\n", r.Name, r.Lib, r.Clients, r.Rate, r.Warmup,
			*r.GoodputAfterPct, recovered, *r.PerOperation, *r.WastedPct)
	}
	tw.Flush()
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "small clients (1000 of 0.6 ops/s, 1 % of requests 503 at random)\tclient\toperations that succeed\t")
	for _, r := range rows {
		if r.SuccessPct != nil {
			fmt.Fprintf(tw, "%s\t%s\t%.2f %%\t\n", r.Name, r.Lib, *r.SuccessPct)
		}
	}
	tw.Flush()
}
