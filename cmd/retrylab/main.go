// Command retrylab reproduces the retry experiments of five source
// documents (docs/sources.md), and those of the capabilities built on
// them, against in-process fault servers, and prints what happened on the
// wire.
//
// Usage:
//
//	retrylab [-list] [-run REGEX] [-json] [-wide] [-stack a,b,c] [-preset NAME] [-chaos F[:R],…] [-otlp URL]
//
// With no flags it runs every row of the acceptance table, each on a fresh
// client, four at a time, and prints a screen of headline contrasts (what
// a source system does beside what retrystack does, from the run's rows),
// then the rows grouped by source system, each with what it
// sets up and the figure it expects under the one it measured, within 120
// columns (-wide: one line a row). -json prints one JSON object per
// scenario and line instead. -stack and -preset
// rerun the selected scenarios under another layer order or retry preset,
// and -chaos with a fault-injection layer (innermost, or where -stack
// names "chaos"):
// such runs are experiments, so rows that differ from the expected figures
// are marked but do not fail the run.
//
// Exit status: 0 when every row reproduces, 1 when a row deviates, 2 for a
// usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/retrystack/retrystack/chaos"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command line.
type options struct {
	list, json     bool
	filter         *regexp.Regexp
	stack          []string      // nil: each scenario's own
	preset         string        // "": each scenario's own
	otlp           string        // OTLP/HTTP endpoint; "": no telemetry
	experimentMode bool          // -stack, -preset or -chaos given
	wide           bool          // -wide: every column on one line
	chaos          *chaos.Config // -chaos: a fault-injection layer in every row; nil: none
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "retrylab: %v\n", err)
		return 2
	}
	selected := selectScenarios(opts.filter)
	if len(selected) == 0 {
		fmt.Fprintf(stderr, "retrylab: no scenario matches -run %q\n", opts.filter)
		return 2
	}
	if opts.list {
		if err := printList(stdout, selected, opts.json); err != nil {
			fmt.Fprintf(stderr, "retrylab: %v\n", err)
			return 1
		}
		return 0
	}
	rows, err := runAll(ctx, selected, opts)
	if err != nil {
		fmt.Fprintf(stderr, "retrylab: %v\n", err)
		return 1
	}
	if opts.json {
		err = printJSON(stdout, rows)
	} else {
		err = printTable(stdout, rows, opts.experimentMode, opts.wide)
	}
	if err != nil {
		fmt.Fprintf(stderr, "retrylab: %v\n", err)
		return 1
	}
	code := 0
	for _, r := range rows {
		if len(r.deviations) > 0 && !opts.experimentMode {
			code = 1
			if opts.json { // the table shows them; JSON lines stay clean
				fmt.Fprintf(stderr, "retrylab: %s deviates: %s\n", r.sc.id, strings.Join(r.deviations, "; "))
			}
		}
	}
	return code
}

// defaultRun selects the acceptance table's rows; the lab's own rows (base/,
// fix/) run when -run names them.
const defaultRun = `^(seed\d+|chain|ratelimit|routes|breaker|hedge|limit|chaos|writes|field|overload|fleet|lone)/`

const usage = `usage: retrylab [-list] [-run REGEX] [-json] [-wide] [-stack a,b,c] [-preset NAME] [-chaos F[:R],…] [-otlp URL]

  -list          list the scenarios and exit
  -run REGEX     run the scenarios whose id matches REGEX (default: the
                 acceptance table's seed, chain, ratelimit, routes, breaker,
                 hedge, limit, chaos, writes, field and overload rows;
                 the lab's own base/ and fix/ rows run when named)
  -wide          print the table with every column on one line per row
                 (preset, stack, extra figures and the expected figure
                 beside the measured ones), wider than a terminal
  -json          print one JSON object per scenario and line: what was
                 measured, the preset and stack, what was expected, and
                 whether it matched (with -list: the scenarios)
  -stack a,b,c   the layers of every selected scenario, outermost first, from
                 error-for-status, redirect, cookies, retry, breaker, hedge,
                 throttle, limit (4 in flight per host); the list
                 replaces each row's own, and may end with "transport"
  -preset NAME   the retry preset of every selected scenario: default, python,
                 node, codex, reqwest-default, reqwest-for-host, reqwest-never,
                 or none (no retry layer)
  -chaos F[:R],… a fault-injection layer (package chaos) in every selected row,
                 innermost unless -stack places "chaos": faults latency
                 (100 ms + up to 100 ms), status (503), refuse, reset,
                 cut-body, stall-body, each at rate R (default 1), seed 1;
                 replaces a row's own faults. An experiment, as -stack is
  -otlp URL      export each scenario as a trace of its own, service
                 "retrylab", to an OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318);
                 adds the telemetry and attempt-telemetry layers. Needs the
                 exporter, left out of the default build to keep it fast:
                 go run -tags otlp ./cmd/retrylab -otlp URL

The table opens with a screen of headline contrasts, each from rows of the
run (left out when one of them did not run or deviates), then the legend:

` + legend + `

Rows run under -stack or -preset are experiments: they are compared with
the expected figures, but a difference does not fail the run.

Exit status: 0 when every row reproduces, 1 when one deviates, 2 for a
usage error.
`

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("retrylab", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by run
	list := fs.Bool("list", false, "")
	runRE := fs.String("run", defaultRun, "")
	asJSON := fs.Bool("json", false, "")
	wide := fs.Bool("wide", false, "")
	stack := fs.String("stack", "", "")
	preset := fs.String("preset", "", "")
	otlpEndpoint := fs.String("otlp", "", "")
	chaosSpec := fs.String("chaos", "", "")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	opts := options{list: *list, json: *asJSON, wide: *wide, preset: *preset, otlp: *otlpEndpoint}
	if opts.otlp != "" {
		if u, err := url.Parse(opts.otlp); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return options{}, fmt.Errorf("bad -otlp %q: want an http or https URL such as http://127.0.0.1:4318", opts.otlp)
		}
	}
	re, err := regexp.Compile(*runRE)
	if err != nil {
		return options{}, fmt.Errorf("bad -run: %v", err)
	}
	opts.filter = re
	if opts.preset != "" {
		if _, ok := presetTable[opts.preset]; !ok {
			return options{}, fmt.Errorf("unknown preset %q (have %s)", opts.preset, strings.Join(presetNames(), ", "))
		}
	}
	if *chaosSpec != "" {
		cfg, err := parseChaos(*chaosSpec)
		if err != nil {
			return options{}, fmt.Errorf("bad -chaos: %v", err)
		}
		opts.chaos = &cfg
	}
	if *stack != "" {
		opts.stack = strings.Split(*stack, ",")
		if n := len(opts.stack); opts.stack[n-1] == "transport" {
			opts.stack = opts.stack[:n-1] // the base may be named, but is always last
		}
		preset := opts.preset
		if preset == "" {
			preset = "default"
		}
		check := scenario{}
		if opts.chaos != nil {
			cfg := *opts.chaos
			check.chaos = func(*trial) chaos.Config { return cfg }
		}
		if _, err := buildStack(opts.stack, check, preset, &trial{}); err != nil {
			return options{}, fmt.Errorf("bad -stack: %v", err)
		}
	}
	opts.experimentMode = opts.stack != nil || opts.preset != "" || opts.chaos != nil
	return opts, nil
}

// parseChaos reads -chaos: a comma list of KIND[:RATE] (rate 1 when left
// out), each a fault on every request: latency (100 ms + up to 100 ms),
// status (503), refuse, reset, cut-body (after 0 bytes) or stall-body.
// The faults hit every attempt, with seed 1.
func parseChaos(spec string) (chaos.Config, error) {
	kinds := map[string]chaos.Fault{
		"latency":    {Kind: chaos.Latency, Delay: 100 * time.Millisecond, Jitter: 100 * time.Millisecond},
		"status":     {Kind: chaos.Status, Status: 503},
		"refuse":     {Kind: chaos.Refuse},
		"reset":      {Kind: chaos.Reset},
		"cut-body":   {Kind: chaos.CutBody},
		"stall-body": {Kind: chaos.StallBody},
	}
	cfg := chaos.Config{Seed: 1}
	for part := range strings.SplitSeq(spec, ",") {
		name, rate, hasRate := strings.Cut(strings.TrimSpace(part), ":")
		f, ok := kinds[name]
		if !ok {
			return chaos.Config{}, fmt.Errorf("unknown fault %q (have latency, status, refuse, reset, cut-body, stall-body)", name)
		}
		f.Rate = 1
		if hasRate {
			r, err := strconv.ParseFloat(rate, 64)
			if err != nil {
				return chaos.Config{}, fmt.Errorf("rate %q of %s: not a number", rate, name)
			}
			f.Rate = r
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	if err := chaos.Layer(cfg).Err; err != nil { // a rate outside [0, 1]
		return chaos.Config{}, err
	}
	return cfg, nil
}
