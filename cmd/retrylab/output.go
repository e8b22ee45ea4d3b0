package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
)

// expected is a row's expected figures as JSON, in scenarios.tsv's
// notation ("-": not checked; "a|b": either).
type expected struct {
	ServerRequests string `json:"server_requests"`
	Result         string `json:"result"`
	Stop           string `json:"stop"`
	Extra          string `json:"extra"`
}

func expectedOf(e expect) expected { return expected{e.requests, e.result, e.stop, e.extra} }

// listed is a scenario as -list -json prints it.
type listed struct {
	ID       string   `json:"id"`
	Setup    string   `json:"setup"`
	Preset   string   `json:"preset"`
	Stack    []string `json:"stack"`
	Expected expected `json:"expected"`
}

func printList(w io.Writer, scs []scenario, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, sc := range scs {
			stack := sc.stack
			if stack == nil {
				stack = defaultStack
			}
			if err := enc.Encode(listed{sc.id, sc.setup, sc.preset, stack, expectedOf(sc.want)}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, sc := range scs {
		fmt.Fprintf(tw, "%s\t%s\n", sc.id, sc.setup)
	}
	return tw.Flush()
}

// printJSON prints one object per row and line: the design's shape (id,
// server_requests, result, stop, planned_waits_ms, extra: what was
// measured), and what a machine needs to check it: the preset and stack
// it ran under, the expected figures, whether they matched and how not.
func printJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		line := struct {
			ID string `json:"id"`
			figures
			Preset     string   `json:"preset"`
			Stack      string   `json:"stack"`
			Expected   expected `json:"expected"`
			Matched    bool     `json:"matched"`
			Deviations []string `json:"deviations"`
			Ours       *ours    `json:"ours,omitempty"`
		}{r.sc.id, r.got, r.preset, r.stack, expectedOf(r.sc.want), len(r.deviations) == 0, r.deviations, oursOf(r.ours)}
		if line.Deviations == nil {
			line.Deviations = []string{}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// ours is the row's scenario under retrystack's defaults, shaped like the
// row's own figures.
type ours struct {
	ServerRequests []int             `json:"server_requests"`
	Result         string            `json:"result"`
	Stop           string            `json:"stop,omitempty"`
	Extra          map[string]string `json:"extra"`
}

func oursOf(f *figures) *ours {
	if f == nil {
		return nil
	}
	return &ours{f.ServerRequests, f.Result, f.Stop, f.Extra}
}

// oursLine says in one line what retrystack's defaults did in a row's
// scenario: "3 requests, 503, attempts-exhausted; k=v".
func oursLine(f *figures) string {
	s := fmt.Sprintf("%s, %s, %s", plural(sum(f.ServerRequests), "request"), f.Result, dash(f.Stop))
	if x := extra(f.Extra); x != "" {
		s += "; " + x
	}
	return s
}

// waits is the table's WAITS: the planned waits, or "none".
func waits(r row) string {
	if w := runs(r.got.PlannedWaitsMS); w != "" {
		return w
	}
	return "none"
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// groups say, in one line, what each group of rows is about: the source
// system it reproduces (docs/sources.md) or the capability it shows.
var groups = map[string]string{
	"seed000":   "reqwest 0.13.5's retry module (Rust): its client default, for_host and never",
	"seed001":   "a careful hand-written client on Python's standard library",
	"seed002":   "OpenAI Codex's model client (Rust): request and stream retries, fallback, auth refresh",
	"seed003":   "reqwest with a custom retry-on-503 classifier: a POST resent, a cookie lost, the fixes",
	"seed004":   "a careful GET-only client (Node.js): Retry-After, deadlines, cancellation, a lost write",
	"chain":     "a chain of services, caller → S1 → S2 → S3: retrying at one layer (docs/cross-layer.md)",
	"ratelimit": "rate-limit fields as hints, like Retry-After (docs/cross-layer.md)",
	"routes":    "one policy per endpoint, in one place (docs/cross-layer.md)",
	"breaker":   "a circuit breaker outside and inside the retry layer (docs/ordering.md)",
	"hedge":     "hedged requests against a slow tail (docs/ordering.md)",
	"limit":     "a concurrency limit per host inside the retry layer (docs/ordering.md)",
	"chaos":     "faults injected below the retry layer, met as real ones (docs/ordering.md)",
	"writes":    "safe writes: automatic Idempotency-Key and the server's protocol (docs/safe-writes.md)",
	"field":     "faults of the field, under retrystack's defaults: the SDKs and proxies it runs behind",
	"base":      "net/http alone, no retry layer",
	"fix":       "the lab's own fixes of the seeds' pitfalls",
}

// legend explains the table's columns and notations.
const legend = `SERVER: the requests the server saw, per operation of the row ("1×20,5": twenty operations
  of 1 request, then one of 5); for a chain, what S1, S2 and S3 saw. RESULT: the final status, or
  "error". STOP: the retry layer's stop reason. WAITS: the waits it planned, in ms ("none": no
  retry waited). CHECK: ✓ the row reproduces its expected figures, ✗ it does not. Under each row:
  what the server does and what the client is set to do, then what the row expects: the source's
  figure ("any": not checked; "a|b": either); under a row that reproduces another client, what
  retrystack's defaults do in the same scenario. -wide prints it all on one line, with the preset
  and the stack.`

// printTable prints the headline contrasts (not for experiments) and the
// legend, then the rows grouped by the part of their
// id before "/", each group under a line saying what it is, each row with
// its check mark and, indented below it, its setup and expected figures
// (within 120 columns); then the notes and a summary line. wide prints
// every column on one line instead.
func printTable(w io.Writer, rows []row, experiment, wide bool) error {
	if wide {
		return printWide(w, rows, experiment)
	}
	// The headlines, then the legend: a reader meets the point and the
	// notation before the rows.
	if !experiment {
		printSummary(w, rows)
	}
	fmt.Fprintf(w, "%s\n\n", legend)
	// The columns are aligned across every row, the detail lines between
	// them: widths first.
	type cells struct{ id, server, result, stop, waits string }
	cs := make([]cells, len(rows))
	width := cells{"ID", "SERVER", "RESULT", "STOP", "WAITS"}
	wid := [5]int{}
	for i, r := range rows {
		cs[i] = cells{r.sc.id, clip(runs(r.got.ServerRequests), 16), r.got.Result, dash(r.got.Stop), clip(waits(r), 12)}
		for j, c := range [5]string{cs[i].id, cs[i].server, cs[i].result, cs[i].stop, cs[i].waits} {
			wid[j] = max(wid[j], len([]rune(c)))
		}
	}
	for j, c := range [5]string{width.id, width.server, width.result, width.stop, width.waits} {
		wid[j] = max(wid[j], len(c))
	}
	line := func(c [5]string, check string) {
		fmt.Fprintf(w, "  %-*s  %-*s  %-*s  %-*s  %-*s  %s\n", wid[0], c[0], wid[1], c[1], wid[2], c[2], wid[3], c[3], wid[4], c[4], check)
	}
	var notes []string
	group, ok := "", 0
	for i, r := range rows {
		if g, _, _ := strings.Cut(r.sc.id, "/"); g != group {
			if group != "" {
				fmt.Fprintln(w)
			}
			group = g
			fmt.Fprintf(w, "%s — %s\n", g, groups[g])
			line([5]string{width.id, width.server, width.result, width.stop, width.waits}, "CHECK")
		}
		check := "✓"
		if len(r.deviations) > 0 {
			check = "✗"
		} else {
			ok++
		}
		if r.sc.note != "" {
			notes = append(notes, r.sc.note)
			check += fmt.Sprintf(" [%d]", len(notes))
		}
		line([5]string{cs[i].id, cs[i].server, cs[i].result, cs[i].stop, cs[i].waits}, check)
		detail := describe(r.sc)
		if experiment {
			detail = "[" + r.preset + "; " + r.stack + "] " + detail
		}
		want := "expects " + r.sc.want.String()
		if x := extra(r.got.Extra); x != "" {
			want += "; measured " + x
		}
		lines := []string{detail, want}
		if r.ours != nil {
			lines = append(lines, "retrystack's defaults: "+oursLine(r.ours))
		}
		for _, d := range append(lines, prefixed("✗ ", r.deviations)...) {
			for _, l := range wrap(d, 112) {
				fmt.Fprintf(w, "      %s\n", l)
			}
		}
	}
	return finish(w, rows, notes, ok, experiment, "") // the legend came first
}

// printWide is the table on one line per row, every column.
func printWide(w io.Writer, rows []row, experiment bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var notes []string
	group, ok := "", 0
	for _, r := range rows {
		if g, _, _ := strings.Cut(r.sc.id, "/"); g != group {
			if group != "" {
				fmt.Fprintln(tw)
			}
			group = g
			fmt.Fprintln(tw, "ID\tPRESET\tSTACK\tSERVER\tRESULT\tSTOP\tWAITS ms\tEXTRA\tSEED FIGURE\tCHECK\tRETRYSTACK'S DEFAULTS")
		}
		check := "✓"
		if len(r.deviations) > 0 {
			check = "✗ " + strings.Join(r.deviations, "; ")
		} else {
			ok++
		}
		if r.sc.note != "" {
			notes = append(notes, r.sc.note)
			check += fmt.Sprintf(" [%d]", len(notes))
		}
		ours := "-"
		if r.ours != nil {
			ours = oursLine(r.ours)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.sc.id, r.preset, r.stack, runs(r.got.ServerRequests), r.got.Result,
			dash(r.got.Stop), waits(r), dash(extra(r.got.Extra)), r.sc.want, check, ours)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return finish(w, rows, notes, ok, experiment, "")
}

// finish prints the notes, the legend and the summary line.
func finish(w io.Writer, rows []row, notes []string, ok int, experiment bool, legend string) error {
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	for i, n := range notes {
		for j, line := range wrap(fmt.Sprintf("[%d] %s", i+1, n), 116) {
			if j > 0 {
				line = "    " + line
			}
			fmt.Fprintln(w, line)
		}
	}
	if legend != "" {
		fmt.Fprintf(w, "\n%s\n", legend)
	}
	verdict := "scenarios reproduce"
	if experiment {
		verdict = "rows match the expected figures (experiment: -stack, -preset or -chaos given)"
	}
	_, err := fmt.Fprintf(w, "\n%d/%d %s\n", ok, len(rows), verdict)
	return err
}

func extra(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runs lists xs for the table, a run of three or more equal values as
// "v×n": a thousand waits of 0 ms print as "0×1000".
func runs[T int | int64](xs []T) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j] == xs[i] {
			j++
		}
		v := strconv.FormatInt(int64(xs[i]), 10)
		if n := j - i; n >= 3 {
			parts = append(parts, v+"×"+strconv.Itoa(n))
		} else {
			parts = append(parts, strings.Repeat(v+",", n-1)+v)
		}
		i = j
	}
	return strings.Join(parts, ",")
}

// String prints an expectation as the table's SEED FIGURE: server
// requests, result and stop reason, in the acceptance table's notation.
// String is the expected figures as the table prints them: "any" where
// a figure is not checked ("-" in scenarios.tsv), so that it never reads
// as "none".
func (e expect) String() string {
	return anyIfDash(compactRuns(e.requests)) + " " + anyIfDash(e.result) + " " + anyIfDash(e.stop)
}

func anyIfDash(s string) string {
	if s == "-" {
		return "any"
	}
	return s
}

// compactRuns shortens a long comma list of numbers as runs does.
func compactRuns(list string) string {
	var xs []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return list
		}
		xs = append(xs, n)
	}
	return runs(xs)
}

// wrap breaks s into lines of at most width runes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		wr := []rune(word)
		if len(cur) > 0 && len(cur)+1+len(wr) > width {
			lines = append(lines, string(cur))
			cur = nil
		}
		if len(cur) > 0 {
			cur = append(cur, ' ')
		}
		cur = append(cur, wr...)
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// paths say what the fault server's routes do, for readers of the table.
var paths = []struct {
	re    *regexp.Regexp
	plain string
}{
	{regexp.MustCompile(`/s/(\d{3})\b`), "/s/$1 (always $1)"},
	{regexp.MustCompile(`/fail/(\d+)/(\d{3})\b`), "/fail/$1/$2 ($2 for the first $1, then 200)"},
	{regexp.MustCompile(`/abort\b`), "/abort (the server closes the connection without an answer)"},
}

// describe is a row's setup in plainer words: what its preset is and what
// the server's routes do.
func describe(sc scenario) string {
	d := sc.setup
	for _, p := range paths {
		d = p.re.ReplaceAllString(d, p.plain)
	}
	if pr, ok := presetTable[sc.preset]; ok && strings.HasPrefix(d, "preset "+sc.preset) {
		d = "preset " + sc.preset + " (" + pr.about + ")" + strings.TrimPrefix(d, "preset "+sc.preset)
	}
	return d
}
