package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/internal/testkit/faultserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runLab(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// testRun is the rows the tests run by default: the default run's but the
// fleet/ rows. Those measure, in real time, how fast a service recovers
// under a load of up to 900 requests a second through the whole stack; at
// 900 a second the margin is the service's own (a fleet that never
// retries takes 2.5 s of the row's 3), and a `go test ./...` running other
// packages beside them, or the race detector, takes the CPU they need.
// `go run ./cmd/retrylab` runs them alone, as CI does;
// TestFleetRowsAt600 runs the rows whose margin holds under load.
func testRun() string {
	r := strings.Replace(defaultRun, "|fleet", "", 1)
	if r == defaultRun {
		panic("testRun: defaultRun no longer names |fleet")
	}
	return r
}

// The fleet rows at 600 operations a second, whose margin is wide
// (recovery in 0–100 ms against 1 s), and the small clients' row.
func TestFleetRowsAt600(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector slows each of 600 requests a second several times over: go run ./cmd/retrylab checks these rows")
	}
	code, out, stderr := runLab(t, "-run", `^fleet/(defaults-1-client|defaults-100-clients|defaults-1000-clients|small-clients-keep-retrying)$`)
	if code != 0 || !strings.HasSuffix(out, "\n4/4 scenarios reproduce\n") {
		t.Fatalf("exit %d, stderr %q, rows that do not reproduce:\n%s\nthe whole output:\n%s", code, stderr, failedRows(out), out)
	}
}

// failedRows is the table's rows marked ✗, each with the lines under it,
// so that a failure's first lines name the row even where a CI log keeps
// only the start and the end of a long output.
func failedRows(out string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		row := strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.Contains(fields[0], "/")
		switch {
		case row && strings.Contains(line, " ✗"):
			in = true
		case row || line == "":
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func TestDefaultRunReproducesEveryRow(t *testing.T) {
	code, out, stderr := runLab(t, "-run", testRun())
	if code != 0 {
		t.Fatalf("exit %d, stderr %q, rows that do not reproduce:\n%s\nthe whole output:\n%s", code, stderr, failedRows(out), out)
	}
	n := len(seedIDs())
	want := fmt.Sprintf("\n%d/%d scenarios reproduce\n", n, n)
	if !strings.HasSuffix(out, want) {
		t.Errorf("output does not end with %q:\n%s", want, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("a line of %d columns, more than a terminal's 120: %q", n, line)
		}
	}
	if !strings.Contains(out, "seed000 — reqwest 0.13.5's retry module (Rust)") || !strings.Contains(out, "SERVER: the requests the server saw") {
		t.Error("the table lacks its group lines or its legend")
	}
	// The headlines first, with this run's figures, then the legend, then the rows.
	summary, legendAt, rowsAt := strings.Index(out, "At a glance"), strings.Index(out, "SERVER: the requests"), strings.Index(out, "seed000 — ")
	if summary != 0 || legendAt < summary || rowsAt < legendAt {
		t.Errorf("summary at %d, legend at %d, rows at %d: want them in this order, the summary first", summary, legendAt, rowsAt)
	}
	for _, h := range []string{"sends it 3 times, 3 orders written", "sends it once, 1 order written", `"lb=node-2; session=abc"`,
		"3003 requests without a budget", "5 requests: at most 3 attempts a GET, and a budget that only successes refill", "S3 sees 27 requests for one GET", "S3 sees 3\n"} {
		if !strings.Contains(out[:legendAt], h) {
			t.Errorf("the summary lacks %q", h)
		}
	}
	if !regexp.MustCompile(`keep it down: 1?\d % of operations succeed`).MatchString(out[:legendAt]) { // the row's limit: under 20 %
		t.Error("the summary lacks the naive clients' goodput")
	}
	// A reproduction of another client's pitfall shows retrystack's
	// defaults beside it: reqwest's 3 POSTs and 3 orders, then ours.
	if !strings.Contains(out, "retrystack's defaults: 1 request, 503, not-idempotent; orders_written=1") {
		t.Error("seed003/naive-post-orders lacks retrystack's defaults beside it")
	}
}

// jsonRun is the rows TestJSONLines runs: every shape of figures (the
// seed rows with retrystack's defaults beside them, chains, rate limits,
// routes, breakers, limits, faults) without a second run of the rows that
// measure time under load, which TestDefaultRunReproducesEveryRow runs.
const jsonRun = `^(seed\d+|chain|ratelimit|routes|breaker|limit|chaos)/`

func TestJSONLines(t *testing.T) {
	code, out, stderr := runLab(t, "-json", "-run", jsonRun)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var ids []string
	for _, line := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var keys []string
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []string{"deviations", "expected", "extra", "id", "matched", "planned_waits_ms", "preset", "result", "server_requests", "stack"}
		if _, ok := obj["stop"]; ok {
			want = append(want, "stop")
			slices.Sort(want)
		}
		var id0 string
		json.Unmarshal(obj["id"], &id0)
		if sc := scenarioByID(id0); sc != nil && reproduces(*sc) {
			// A reproduction of another system: retrystack's defaults in
			// the same scenario, shaped like the row's own figures.
			want = append(want, "ours")
			slices.Sort(want)
			var o map[string]json.RawMessage
			json.Unmarshal(obj["ours"], &o)
			for _, k := range []string{"server_requests", "result", "extra"} {
				if _, ok := o[k]; !ok {
					t.Errorf("line %q: ours lacks %s", line, k)
				}
			}
		}
		var matched bool
		json.Unmarshal(obj["matched"], &matched)
		if !matched {
			t.Errorf("line %q: not matched in the default run", line)
		}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("line %q: keys (-want +got):\n%s", line, diff)
		}
		var id string
		json.Unmarshal(obj["id"], &id)
		ids = append(ids, id)
	}
	var want []string
	for _, sc := range scenarios {
		if regexp.MustCompile(jsonRun).MatchString(sc.id) {
			want = append(want, sc.id)
		}
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestListAndRun(t *testing.T) {
	code, out, _ := runLab(t, "-list", "-run", "^base/h2-")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.Fields(line)[0])
	}
	want := []string{"base/h2-get-refused-1", "base/h2-post-refused-1", "base/h2-get-goaway"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-list -run ^base/h2- (-want +got):\n%s", diff)
	}
}

// An experiment reruns a row under another stack: the row may differ from
// its expected figures without failing the run.
func TestStackExperiment(t *testing.T) {
	code, out, stderr := runLab(t, "-json", "-run", "^base/get-503$", "-stack", "error-for-status,transport")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Result != "error" {
		t.Errorf("result %q (%v), want error: the layer turns the 503 into an error", got.Result, err)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "retrylab: flag provided but not defined: -bogus\n"},
		{[]string{"-preset", "nope"}, "retrylab: unknown preset \"nope\" (have alone, codex, default, node, none, python, reqwest-default, reqwest-for-host, reqwest-never)\n"},
		{[]string{"-stack", "hedge,cache"}, "retrylab: bad -stack: middleware: layer \"cache\": not in the stack (have error-for-status, redirect, cookies, retry, breaker, hedge, throttle, limit)\n"},
		{[]string{"-stack", "hedge,hedge"}, "retrylab: bad -stack: middleware: layer \"hedge\": duplicate name\n"},
		{[]string{"-run", "("}, "retrylab: bad -run: error parsing regexp: missing closing ): `(`\n"},
		{[]string{"-run", "no-such-row"}, "retrylab: no scenario matches -run \"no-such-row\"\n"},
		{[]string{"extra"}, "retrylab: unexpected argument \"extra\"\n"},
		{[]string{"-otlp", "notaurl"}, "retrylab: bad -otlp \"notaurl\": want an http or https URL such as http://127.0.0.1:4318\n"},
		{[]string{"-preset", "none", "-stack", "retry"}, "retrylab: bad -stack: middleware: layer \"retry\": not in the stack (have error-for-status, redirect, cookies, breaker, hedge, throttle, limit)\n"},
	}
	for _, tt := range tests {
		code, out, stderr := runLab(t, tt.args...)
		if code != 2 || out != "" || stderr != tt.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, stderr, tt.want)
		}
	}
}

func TestScenarioIDsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range scenarios {
		if seen[sc.id] {
			t.Errorf("duplicate scenario id %q", sc.id)
		}
		seen[sc.id] = true
	}
}

// The lab's expected figures are its own, but they must say what the
// acceptance table (a copy of ../shared/scenarios.tsv) says.
func TestExpectationsMatchAcceptanceTable(t *testing.T) {
	data, err := os.ReadFile("testdata/scenarios.tsv")
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]expect{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, "\t")
		if i == 0 || len(f) != 7 {
			continue
		}
		table[f[0]] = expect{requests: f[3], result: f[4], stop: f[5], extra: f[6]}
	}
	for id := range table {
		if !slices.ContainsFunc(scenarios, func(sc scenario) bool { return sc.id == id }) {
			t.Errorf("%s of the acceptance table is missing from the lab", id)
		}
	}
	for _, sc := range scenarios {
		want, ok := table[sc.id]
		if !ok {
			if regexp.MustCompile(defaultRun).MatchString(sc.id) {
				t.Errorf("%s is not in the acceptance table", sc.id)
			}
			continue
		}
		if diff := cmp.Diff(want, sc.want, cmp.AllowUnexported(expect{})); diff != "" {
			t.Errorf("%s: expectation differs from the table (-table +lab):\n%s", sc.id, diff)
		}
	}
}

func TestCompare(t *testing.T) {
	got := figures{
		ServerRequests: []int{2, 1}, Result: "200", Stop: "success", PlannedWaitsMS: []int64{25, 50},
		Extra: map[string]string{"me_cookie": "lb=node-2; session=abc", "pitfalls": "cookie-lost,non-idempotent-retried", "elapsed_ms": "12"},
	}
	tests := []struct {
		want expect
		dev  []string
	}{
		{expect{"2,1", "200", "success", "-"}, nil},
		{expect{"-", "-", "-", "-"}, nil},
		{expect{"2,1", "503|200", "not-idempotent|success", "me_cookie=lb=node-2; session=abc;planned_waits_ms=25,50"}, nil},
		{expect{"2,1", "200", "success", "pitfalls=non-idempotent-retried,cookie-lost;elapsed_under_ms=1000"}, nil},
		{expect{"2,1", "200", "success", "pitfalls=cookie-lost"}, nil},
		{expect{"2,1", "200", "success", "pitfalls=scope-leak"}, []string{`pitfalls "cookie-lost,non-idempotent-retried", want "scope-leak"`}},
		{expect{"3", "error", "cancelled", "elapsed_under_ms=10"}, []string{
			"server_requests 2,1, want 3", "result 200, want error", "stop success, want cancelled", `elapsed_under_ms "12", want "10"`,
		}},
		{expect{"2,1", "200", "success", "planned_waits_ms=25;orders_written=1"}, []string{
			`planned_waits_ms "25,50", want "25"`, `orders_written "", want "1"`,
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.dev, compare(tt.want, got)); diff != "" {
			t.Errorf("compare(%+v) (-want +got):\n%s", tt.want, diff)
		}
	}
}

func TestRuns(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{0, 0}, "0,0"},
		{[]int{101, 1, 1}, "101,1,1"},
		{[]int{1, 1, 1, 1, 5}, "1×4,5"},
		{[]int{2, 0, 0, 0, 2}, "2,0×3,2"},
	}
	for _, tt := range tests {
		if got := runs(tt.in); got != tt.want {
			t.Errorf("runs(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// -preset none reruns every row without a retry layer: an experiment that
// runs to the end.
func TestPresetNone(t *testing.T) {
	code, out, stderr := runLab(t, "-preset", "none", "-run", "seed004/(always-503|503-503-200)")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(out, "[none; redirect → cookies → transport]") || strings.Contains(out, "cannot run") {
		t.Errorf("rows did not run without the retry layer:\n%s", out)
	}
}

// seedIDs are the rows a default run prints: the acceptance table's.
// seedIDs are the ids of the acceptance table's rows, the default run.
func seedIDs() []string {
	var ids []string
	for _, sc := range scenarios {
		if regexp.MustCompile(testRun()).MatchString(sc.id) {
			ids = append(ids, sc.id)
		}
	}
	return ids
}

// The lab's own rows run when named.
func TestOwnRows(t *testing.T) {
	code, out, stderr := runLab(t, "-run", "^(base|fix)/")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
	if !strings.HasSuffix(out, "\n11/11 scenarios reproduce\n") {
		t.Errorf("output:\n%s", out)
	}
}

// The default build leaves the OTLP exporter out, and says how to get it.
func TestOTLPNeedsItsTag(t *testing.T) {
	if exportTraces != nil {
		t.Skip("built with -tags otlp")
	}
	code, _, stderr := runLab(t, "-otlp", "http://127.0.0.1:4318", "-run", "^seed000/default-get-503$")
	if code != 1 || !strings.Contains(stderr, "go run -tags otlp ./cmd/retrylab") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// -list -json lists the scenarios, with what each expects.
func TestListJSON(t *testing.T) {
	code, out, stderr := runLab(t, "-list", "-json", "-run", "^seed000/default-get-503$")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var l struct {
		ID       string   `json:"id"`
		Preset   string   `json:"preset"`
		Stack    []string `json:"stack"`
		Expected struct {
			Result string `json:"result"`
		} `json:"expected"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if l.ID != "seed000/default-get-503" || l.Preset != "reqwest-default" || len(l.Stack) != 3 || l.Expected.Result != "503" {
		t.Errorf("listed %+v", l)
	}
}

// -wide keeps every column on one line.
func TestWide(t *testing.T) {
	code, out, _ := runLab(t, "-wide", "-run", "^seed000/default-get-503$")
	if code != 0 || !strings.Contains(out, "PRESET") || !strings.Contains(out, "SEED FIGURE") || !strings.Contains(out, "reqwest-default  redirect → cookies → retry → transport") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// reqwest's default retries no status; retrystack's retries the 503.
	if !strings.Contains(out, "RETRYSTACK'S DEFAULTS") || !strings.Contains(out, "3 requests, 503, attempts-exhausted") {
		t.Errorf("-wide lacks retrystack's defaults beside the row:\n%s", out)
	}
}

func scenarioByID(id string) *scenario {
	for i := range scenarios {
		if scenarios[i].id == id {
			return &scenarios[i]
		}
	}
	return nil
}

// A headline stands on rows that ran and reproduced: one whose row
// deviates, or did not run, is left out rather than told with a wrong figure.
func TestSummaryLeavesOutWhatDidNotReproduce(t *testing.T) {
	byID := map[string]scenario{}
	for _, sc := range scenarios {
		byID[sc.id] = sc
	}
	chain := func(deviations ...string) []row {
		return []row{
			{sc: byID["chain/naive-3-layers"], got: figures{ServerRequests: []int{3, 9, 27}}, deviations: deviations},
			{sc: byID["chain/one-layer-retries"], got: figures{ServerRequests: []int{1, 1, 3}}},
		}
	}
	var buf bytes.Buffer
	printSummary(&buf, chain())
	if !strings.Contains(buf.String(), "S3 sees 27 requests for one GET") || strings.Contains(buf.String(), "a POST meets a 503") {
		t.Errorf("with the chain rows alone:\n%s", buf.String())
	}
	buf.Reset()
	printSummary(&buf, chain("server_requests 3,9,26, want 3,9,27"))
	if buf.Len() != 0 {
		t.Errorf("a headline over a deviating row:\n%s", buf.String())
	}
	buf.Reset()
	printSummary(&buf, []row{{sc: byID["seed003/naive-post-orders"], got: figures{ServerRequests: []int{3}}}})
	if buf.Len() != 0 {
		t.Errorf("a headline without retrystack's side of it:\n%s", buf.String())
	}
}

// What retrystack's defaults do beside a reproduction is checked where the
// opening screen tells it: a regression there is a deviation of the row,
// not a headline told with the wrong figure.
func TestOursIsChecked(t *testing.T) {
	srv, err := faultserver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var sc scenario
	for _, s := range scenarios {
		if s.id == "seed003/naive-post-orders" {
			sc = s
		}
	}
	if sc.wantOurs == nil {
		t.Fatal("seed003/naive-post-orders has no expectation for retrystack's defaults")
	}
	if r := runRow(context.Background(), srv, nil, sc, options{}); len(r.deviations) != 0 || r.ours == nil {
		t.Fatalf("as it is: deviations %q, ours %v", r.deviations, r.ours)
	}
	sc.wantOurs = &expect{"3", "503", "attempts-exhausted", "orders_written=3"}
	r := runRow(context.Background(), srv, nil, sc, options{})
	want := []string{"retrystack's defaults: server_requests 1, want 3", "retrystack's defaults: stop not-idempotent, want attempts-exhausted"}
	for _, w := range want {
		if !slices.Contains(r.deviations, w) {
			t.Errorf("deviations %q lack %q", r.deviations, w)
		}
	}
}

// -chaos runs rows with a fault-injection layer, innermost unless -stack
// places it: an experiment that runs to the end; a bad spec is a usage
// error.
func TestChaosFlag(t *testing.T) {
	code, out, stderr := runLab(t, "-run", "^chaos/status-below-retry$", "-chaos", "refuse:1")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// Every attempt refused before it is sent: the server sees nothing.
	if !strings.Contains(out, "→ retry → chaos → transport]") || !strings.Contains(out, "0×10") {
		t.Errorf("the row did not run with the chaos layer's refusals:\n%s", out)
	}
	code, out, _ = runLab(t, "-run", "^breaker/inside-retry$", "-chaos", "status", "-stack", "chaos,redirect,cookies,retry,breaker")
	if code != 0 || !strings.Contains(out, "[default; chaos → redirect → cookies → retry → breaker → transport]") {
		t.Errorf("exit %d; -stack did not place the chaos layer:\n%s", code, out)
	}
	for _, spec := range []string{"bogus", "reset:2", "reset:x"} {
		if code, _, stderr := runLab(t, "-chaos", spec); code != 2 || !strings.HasPrefix(stderr, "retrylab: bad -chaos: ") {
			t.Errorf("-chaos %s: exit %d, stderr %q", spec, code, stderr)
		}
	}
	if code, _, stderr := runLab(t, "-stack", "retry,chaos"); code != 2 || !strings.Contains(stderr, `layer "chaos": not in the stack`) {
		t.Errorf("chaos in -stack without -chaos: exit %d, stderr %q", code, stderr)
	}
}

// The limit/ and chaos/ rows reproduce (the whole default run is slow:
// this runs them alone, for -race -count=N).
func TestLimitAndChaosRows(t *testing.T) {
	code, out, stderr := runLab(t, "-run", "^(limit|chaos)/")
	if code != 0 || !strings.HasSuffix(out, "\n4/4 scenarios reproduce\n") {
		t.Fatalf("exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
}
