// Command compare prints every measurement of package bench side by side:
// the success path, the retry path, the storms, the POST on 503, and the
// budget and decision micro-benchmarks; when named, the lone-client cells
// and the fleet experiment.
//
//	cd bench && go run ./cmd/compare [-json] [-benchtime 500ms] [-rounds 5] [-run REGEX] [-lib REGEX]
//	cd bench && go run ./cmd/compare -run lone [-lib REGEX]
//	cd bench && go run ./cmd/compare -run fleet [-lib REGEX] [-clients 1,100] [-rates 600] [-warmups real,compressed,1s]
//
// Wall times drift 10-25 % between runs on 2 cores, so every benchmark runs
// in rounds, the libraries interleaved, and ns/op is the median round;
// vs_net_http divides it by bare net/http's in the same measurement. For a
// confidence interval run `go test -bench . -count 10` and benchstat;
// allocation counts are exact.
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/retrystack/retrystack/bench"
)

// row is one measurement; fields that do not apply are left out.
type row struct {
	Name            string   `json:"name"`
	Lib             string   `json:"lib"`
	NsOp            *float64 `json:"ns_op,omitempty"`
	VsNetHTTP       *float64 `json:"vs_net_http,omitempty"`
	AllocsOp        *int64   `json:"allocs_op,omitempty"`
	BytesOp         *int64   `json:"bytes_op,omitempty"`
	Amplification   *float64 `json:"amplification,omitempty"`
	Sends           *int     `json:"sends,omitempty"`
	Dials           *int     `json:"dials,omitempty"`
	OpenConnsAfter  *int     `json:"open_conns_after,omitempty"`
	GoroutinesAfter *int     `json:"goroutines_after,omitempty"`
	P50Ms           *float64 `json:"p50_ms,omitempty"`
	P99Ms           *float64 `json:"p99_ms,omitempty"`
	ExtraLoadPct    *float64 `json:"extra_load_pct,omitempty"`
	// The metastable-failure experiment.
	GoodputAfterPct *float64  `json:"goodput_after_pct,omitempty"`
	RecoveredMs     *float64  `json:"recovered_ms,omitempty"` // absent: never within the run
	WastedPct       *float64  `json:"wasted_pct,omitempty"`
	PerOperation    *float64  `json:"requests_per_op,omitempty"`
	Goodput         []float64 `json:"goodput,omitempty"` // per 100 ms, by operation start
	// The fleet experiment: Clients clients sharing Rate operations a
	// second; Warmup is "10 s" (a full budget window) or "1 s".
	Clients    int      `json:"clients,omitempty"`
	Rate       float64  `json:"rate,omitempty"`
	Warmup     string   `json:"warmup,omitempty"`
	SuccessPct *float64 `json:"success_pct,omitempty"` // small clients against random failures; the lone cells
	// The lone-client cells (Name lone-*; Lib is the configuration):
	// operations, requests the server received, attempts the client made
	// (above any fault injected below it), what failed or happened, and
	// how the cell was run.
	Ops      *int   `json:"ops,omitempty"`
	Requests *int   `json:"requests,omitempty"`
	Attempts *int   `json:"attempts,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Note     string `json:"note,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// runFlag is -run as given: the fleet experiment runs only when named.
var runFlag *string

func main() {
	asJSON := flag.Bool("json", false, "print one JSON object per measurement")
	benchtime := flag.Duration("benchtime", 500*time.Millisecond, "time per benchmark and round")
	rounds := flag.Int("rounds", 5, "rounds of each benchmark, the libraries interleaved; ns/op is their median")
	run := flag.String("run", "", "measure only those whose name matches this regular expression (e.g. in-memory; lone and fleet run only when named: 4 minutes and hours)")
	lib := flag.String("lib", "", "in the lone cells and the fleet experiment, only the configurations whose name matches this regular expression")
	clients := flag.String("clients", "", "in the fleet experiment, the fleet sizes (default 1,10,100,1000,10000)")
	rates := flag.String("rates", "", "in the fleet experiment, the rates in operations a second (default 600,900)")
	warmups := flag.String("warmups", "", "in the fleet experiment, the warm-ups among real, compressed, 1s (default all three; 1s for retrystack's budgets only)")
	flag.Parse()
	testing.Init()
	flag.Set("test.benchtime", benchtime.String())
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "compare: -rounds must be at least 1")
		os.Exit(2)
	}

	only, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare: -run:", err)
		os.Exit(2)
	}
	libs, err := regexp.Compile(*lib)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare: -lib:", err)
		os.Exit(2)
	}
	fleet, err := parseFleet(*clients, *rates, *warmups)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	runFlag = run
	rows, err := measure(*rounds, only, libs, fleet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range rows {
			enc.Encode(r)
		}
		return
	}
	if lone := slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return !strings.HasPrefix(r.Name, "lone-") }); len(lone) > 0 {
		rows = slices.DeleteFunc(rows, func(r row) bool { return strings.HasPrefix(r.Name, "lone-") })
		printLone(lone)
		if len(rows) == 0 {
			return
		}
		fmt.Println()
	}
	if fleet := slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return !strings.HasPrefix(r.Name, "fleet") }); len(fleet) > 0 {
		rows = slices.DeleteFunc(rows, func(r row) bool { return strings.HasPrefix(r.Name, "fleet") })
		printFleet(fleet)
		if len(rows) == 0 {
			return
		}
		fmt.Println()
	}
	if meta := slices.DeleteFunc(slices.Clone(rows), func(r row) bool { return r.GoodputAfterPct == nil }); len(meta) > 0 {
		rows = slices.DeleteFunc(rows, func(r row) bool { return r.GoodputAfterPct != nil })
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "metastable failure	client	goodput after the trigger	recovered after	requests per operation	wasted work	")
		for _, r := range meta {
			recovered := "never"
			if r.RecoveredMs != nil {
				recovered = fmt.Sprintf("%.0f ms", *r.RecoveredMs)
			}
			fmt.Fprintf(tw, "%s	%s	%.0f %%	%s	%.2f	%.0f %%	\n", r.Name, r.Lib, *r.GoodputAfterPct, recovered, *r.PerOperation, *r.WastedPct)
		}
		tw.Flush()
		if len(rows) == 0 {
			return
		}
		fmt.Println()
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tlib\tns/op\tvs net/http\tB/op\tallocs/op\tamplification\tdials\topen conns after\tgoroutines after\tp50 ms\tp99 ms\textra load\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, r.Lib,
			show(r.NsOp, "%.0f"), show(r.VsNetHTTP, "%.2f×"), show(r.BytesOp, "%d"), show(r.AllocsOp, "%d"),
			show(r.Amplification, "%.2f×"), show(r.Dials, "%d"), show(r.OpenConnsAfter, "%d"), show(r.GoroutinesAfter, "%d"),
			show(r.P50Ms, "%.0f"), show(r.P99Ms, "%.0f"), show(r.ExtraLoadPct, "%.1f %%"))
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func show[T any](v *T, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func benchmark(name, lib string, fn func(*testing.B)) row {
	r := testing.Benchmark(fn)
	return row{Name: name, Lib: lib, NsOp: ptr(float64(r.NsPerOp())), AllocsOp: ptr(r.AllocsPerOp()), BytesOp: ptr(r.AllocedBytesPerOp())}
}

// interleaved runs fn for every library, round after round, so that a slow
// spell of the machine hits them all alike, and keeps each library's
// median round; with ratio, divided by bare net/http's too.
func interleaved(name string, rounds int, fn func(*testing.B, bench.Lib), ratio, guarded bool) []row {
	libs := bench.Libs
	if !guarded {
		libs = slices.DeleteFunc(slices.Clone(libs), func(l bench.Lib) bool { return l.Guarded })
	}
	runs := make([][]row, len(libs))
	for range rounds {
		for i, lib := range libs {
			runs[i] = append(runs[i], benchmark(name, lib.Name, func(b *testing.B) { fn(b, lib) }))
		}
	}
	out := make([]row, len(runs))
	for i, rs := range runs {
		slices.SortFunc(rs, func(a, b row) int { return cmp.Compare(*a.NsOp, *b.NsOp) })
		out[i] = rs[len(rs)/2]
	}
	if bare := slices.IndexFunc(out, func(r row) bool { return r.Lib == "net/http" }); ratio && bare >= 0 {
		for i := range out {
			out[i].VsNetHTTP = ptr(math.Round(*out[i].NsOp / *out[bare].NsOp * 100) / 100)
		}
	}
	return out
}

// spanCost is what tracing adds in memory: retrystack's operation and
// attempt spans over retrystack, otelhttp's one span over bare net/http.
func spanCost(in []row) []row {
	by := map[string]row{}
	for _, r := range in {
		by[r.Lib] = r
	}
	var out []row
	for _, p := range [][2]string{{"retrystack+otel", "retrystack"}, {"otelhttp", "net/http"}} {
		with, ok1 := by[p[0]]
		without, ok2 := by[p[1]]
		if !ok1 || !ok2 {
			continue
		}
		out = append(out, row{Name: "spans-cost-in-memory", Lib: p[0],
			NsOp: ptr(*with.NsOp - *without.NsOp), AllocsOp: ptr(*with.AllocsOp - *without.AllocsOp), BytesOp: ptr(*with.BytesOp - *without.BytesOp)})
	}
	return out
}

func measure(rounds int, only, libs *regexp.Regexp, fleetOpts fleetOptions) ([]row, error) {
	// A server of its own for each run: closing it closes the connections
	// a library leaked, which would otherwise pile up across rounds.
	srv := bench.Server
	var rows []row
	for _, c := range []struct {
		name  string
		fn    func(*testing.B, bench.Lib)
		ratio bool // whether bare net/http does the same work
		// guarded: also the guarded configurations (the retry path
		// measures retrying with every guard off)
		guarded bool
	}{
		{"get-64B", func(b *testing.B, l bench.Lib) { bench.GET(b, srv(b), l, false) }, true, true},
		{"get-overhead-in-memory", func(b *testing.B, l bench.Lib) { bench.Overhead(b, l) }, true, true},
		{"get-64B-parallel", func(b *testing.B, l bench.Lib) { bench.GET(b, srv(b), l, true) }, true, true},
		{"post-64KiB", func(b *testing.B, l bench.Lib) { bench.POST(b, srv(b), l, false) }, true, true},
		{"post-64KiB-parallel", func(b *testing.B, l bench.Lib) { bench.POST(b, srv(b), l, true) }, true, true},
		// a stream without GetBody: kept for a replay within the limit, sent once past it
		{"put-stream-100KiB", func(b *testing.B, l bench.Lib) { bench.PutStream(b, srv(b), l, 100<<10) }, true, true},
		{"put-stream-300KiB", func(b *testing.B, l bench.Lib) { bench.PutStream(b, srv(b), l, 300<<10) }, true, true},
		// three sends against bare net/http's one: no ratio
		{"retry-503-503-200", func(b *testing.B, l bench.Lib) { bench.Retry(b, srv(b), l) }, false, false},
	} {
		if !only.MatchString(c.name) {
			continue
		}
		out := interleaved(c.name, rounds, c.fn, c.ratio, c.guarded)
		rows = append(rows, out...)
		if c.name == "get-overhead-in-memory" {
			rows = append(rows, spanCost(out)...)
		}
	}
	if only.MatchString("hedge-slow-tail") {
		for _, lib := range bench.Hedgers {
			res, err := bench.SlowTail(lib, 200)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{Name: "hedge-slow-tail", Lib: lib.Name, P50Ms: ptr(ms(res.P50)), P99Ms: ptr(ms(res.P99)),
				ExtraLoadPct: ptr(res.ExtraLoadPct), OpenConnsAfter: ptr(res.OpenConnsAfter)})
		}
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.B, func(http.RoundTripper) http.RoundTripper)
	}{{"breaker-closed-in-memory", bench.BreakerClosed}, {"breaker-open-in-memory", bench.BreakerOpen}} {
		if !only.MatchString(c.name) {
			continue
		}
		for _, br := range bench.Breakers {
			rs := make([]row, 0, rounds)
			for range rounds {
				rs = append(rs, benchmark(c.name, br.Name, func(b *testing.B) { c.fn(b, br.New) }))
			}
			slices.SortFunc(rs, func(a, b row) int { return cmp.Compare(*a.NsOp, *b.NsOp) })
			rows = append(rows, rs[len(rs)/2])
		}
	}
	if only.MatchString("metastable") {
		for _, lib := range bench.Overloaders {
			res, err := bench.Metastable(lib, bench.MetaExperiment)
			if err != nil {
				return nil, err
			}
			r := row{Name: "metastable", Lib: lib.Name, GoodputAfterPct: ptr(math.Round(res.GoodputAfter * 100)),
				WastedPct: ptr(math.Round(res.Wasted * 100)), PerOperation: ptr(math.Round(res.PerOperation*100) / 100), Goodput: res.Goodput}
			if res.Recovered >= 0 {
				r.RecoveredMs = ptr(ms(res.Recovered))
			}
			rows = append(rows, r)
		}
	}
	if *runFlag != "" && only.MatchString("lone") { // 4 minutes: only when named
		lone, err := measureLone(os.Stderr, libs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, lone...)
	}
	if *runFlag != "" && only.MatchString("fleet") { // hours: only when named
		fleet, err := measureFleet(os.Stderr, libs, fleetOpts)
		if err != nil {
			return nil, err
		}
		rows = append(rows, fleet...)
	}
	if !only.MatchString("storm-post-on-503-sends-decision-budget") {
		return rows, nil
	}
	for _, fault := range []string{"503", "500", "reset"} {
		for _, lib := range bench.Libs {
			if lib.Name == "net/http" || lib.Name == "otelhttp" || lib.Name == "retrystack+otel" {
				continue // no retries: nothing to amplify
			}
			res, err := bench.Storm(lib, fault)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{Name: "storm-" + fault, Lib: lib.Name, Amplification: ptr(res.Amplification), Dials: ptr(res.Dials),
				OpenConnsAfter: ptr(res.OpenConnsAfter), GoroutinesAfter: ptr(res.GoroutinesAfter)})
		}
	}
	for _, lib := range bench.Libs {
		if lib.Name == "otelhttp" || lib.Name == "retrystack+otel" {
			continue
		}
		n, err := bench.PostSends(lib)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Name: "post-on-503-sends", Lib: lib.Name, Sends: ptr(n), Amplification: ptr(float64(n))})
	}
	rows = append(rows, benchmark("decision", "retrystack", bench.Decision), benchmark("decision-on-reset", "retrystack", bench.DecisionOnReset), benchmark("budget-parallel", "retrystack", bench.Budget))
	return rows, nil
}
