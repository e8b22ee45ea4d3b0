package main

import (
	"encoding/json"
	"fmt"
	"io"
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
		}{r.sc.id, r.got, r.preset, r.stack, expectedOf(r.sc.want), len(r.deviations) == 0, r.deviations}
		if line.Deviations == nil {
			line.Deviations = []string{}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// printTable prints the rows grouped by the part of their id before "/",
// each with its check mark, then the notes and a summary line.
func printTable(w io.Writer, rows []row, experiment bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var notes []string
	group, ok := "", 0
	for _, r := range rows {
		if g, _, _ := strings.Cut(r.sc.id, "/"); g != group {
			if group != "" {
				fmt.Fprintln(tw)
			}
			group = g
			fmt.Fprintln(tw, "ID\tPRESET\tSTACK\tSERVER\tRESULT\tSTOP\tWAITS ms\tEXTRA\tSEED FIGURE\tCHECK")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.sc.id, r.preset, r.stack, runs(r.got.ServerRequests), r.got.Result,
			dash(r.got.Stop), dash(runs(r.got.PlannedWaitsMS)), dash(extra(r.got.Extra)), r.sc.want, check)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	for i, n := range notes {
		fmt.Fprintf(w, "[%d] %s\n", i+1, n)
	}
	verdict := "scenarios reproduce"
	if experiment {
		verdict = "rows match the expected figures (experiment: -stack or -preset given)"
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
func (e expect) String() string {
	return compactRuns(e.requests) + " " + e.result + " " + e.stop
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
