package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/retrystack/retrystack/bench"
	"github.com/retrystack/retrystack/internal/testkit/overload"
)

// The fleet experiment's cells: clients and rates, each with a full budget
// window of warm-up and with the 1 s warm-up alone.
var (
	fleetClients = []int{1, 10, 100, 1000}
	fleetRates   = []float64{600, 900}
)

// measureFleet runs every cell for every client library with a full
// window of warm-up, and for retrystack's defaults before and after with
// the 1 s warm-up alone (about 12 s a cell, 20 minutes in all), then the
// small clients against random failures. It tells each row on w as it
// comes (a JSON line), so that a long run that stops keeps what it
// measured.
func measureFleet(w io.Writer, libs *regexp.Regexp) ([]row, error) {
	var rows []row
	enc := json.NewEncoder(w)
	for _, credit := range []bool{true, false} {
		warm := "10 s"
		if !credit {
			warm = "1 s"
		}
		for _, rate := range fleetRates {
			for _, n := range fleetClients {
				for i, lib := range bench.FleetLibs {
					if !libs.MatchString(lib.Name) {
						continue
					}
					if !credit && i > 1 {
						continue // the 1 s warm-up: retrystack's budgets, before and after
					}
					res, err := bench.Fleet(lib, n, bench.FleetExperiment(rate, credit))
					if err != nil {
						return nil, err
					}
					rows = append(rows, fleetRow(lib.Name, n, rate, warm, res))
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

func fleetRow(lib string, n int, rate float64, warm string, res overload.Result) row {
	r := row{Name: "fleet", Lib: lib, Clients: n, Rate: rate, Warmup: warm,
		PerOperation: ptr(math.Round(res.Incident*100) / 100), WastedPct: ptr(math.Round(res.Wasted * 100)), Goodput: res.Goodput}
	// Goodput in the 5 s after the trigger: each bucket holds as many
	// operations (an open load), so the mean of the buckets' shares.
	start := int((bench.FleetWarmup + time.Second) / (100 * time.Millisecond))
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
