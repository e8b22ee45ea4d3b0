package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// fleet draws, for the fleet experiment (bench/cmd/compare -run fleet),
// the time each client library's fleet takes to recover against the
// number of clients, one panel per rate, with the full-window warm-up; a
// fleet that never recovers within the run is drawn on the "never" line.
func fleet(r io.Reader, w io.Writer) error {
	type point struct {
		clients   int
		recovered float64 // ms; -1: never
	}
	byRate := map[float64]map[string][]point{}
	var libs []string
	err := lines(r, func(o map[string]json.RawMessage) error {
		var name, lib, warm string
		var clients int
		var rate float64
		recovered := -1.0
		json.Unmarshal(o["name"], &name)
		json.Unmarshal(o["lib"], &lib)
		json.Unmarshal(o["warmup"], &warm)
		json.Unmarshal(o["clients"], &clients)
		json.Unmarshal(o["rate"], &rate)
		if v, ok := o["recovered_ms"]; ok {
			json.Unmarshal(v, &recovered)
		}
		if name != "fleet" || warm != "10 s" || clients < 1 {
			return nil
		}
		if byRate[rate] == nil {
			byRate[rate] = map[string][]point{}
		}
		if !slices.Contains(libs, lib) {
			libs = append(libs, lib)
		}
		byRate[rate][lib] = append(byRate[rate][lib], point{clients, recovered})
		return nil
	})
	if err != nil {
		return err
	}
	if len(byRate) == 0 {
		return errors.New("want the fleet JSON lines of bench/cmd/compare")
	}
	var rates []float64
	for rate := range byRate {
		rates = append(rates, rate)
	}
	slices.Sort(rates)
	colors := []string{"#85929e", "#c0392b", "#2e86c1", "#1e8449", "#d68910", "#7d3c98", "#17a589", "#566573", "#a04000", "#f1c40f"}
	const width, left, panelW, panelH, top, gap = 900, 60, 360, 240, 50, 60
	const maxMs = 10_000.0 // the run's 10 s after the trigger
	var b strings.Builder
	h := top + panelH + 50 + 20*len(libs)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n",
		html.EscapeString("Time to recover from a 1 s brown-out against the number of clients sharing the load (each warmed up 10 s)"))
	for pi, rate := range rates {
		x0 := float64(left + pi*(panelW+gap))
		x := func(clients int) float64 { return x0 + math.Log10(float64(clients))/3*panelW }
		y := func(ms float64) float64 {
			if ms < 0 {
				ms = maxMs * 1.1
			}
			return float64(top) + (1-math.Min(ms, maxMs*1.1)/(maxMs*1.1))*panelH
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-weight="bold">%.0f operations a second (spare capacity %.0f a second)</text>`+"\n", x0, top-8, rate, 1000-rate)
		for _, ms := range []float64{0, 1000, 3000, 10000} {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f s</text>`+"\n", x0, x0+panelW, y(ms), y(ms), x0-4, y(ms)+4, ms/1000)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">never</text>`+"\n", x0-4, y(-1)+4)
		for _, n := range []int{1, 10, 100, 1000} {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n), top+panelH+16, n)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">clients</text>`+"\n", x0+panelW/2, top+panelH+32)
		for li, lib := range libs {
			pts := byRate[rate][lib]
			slices.SortFunc(pts, func(a, b point) int { return a.clients - b.clients })
			var s []string
			for _, p := range pts {
				s = append(s, fmt.Sprintf("%.1f,%.1f", x(p.clients), y(p.recovered)))
			}
			dash := ""
			if li%2 == 1 {
				dash = ` stroke-dasharray="6 3"`
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", colors[li%len(colors)], dash, strings.Join(s, " "))
		}
	}
	for li, lib := range libs {
		ly := top + panelH + 56 + 20*li
		dash := ""
		if li%2 == 1 {
			dash = ` stroke-dasharray="6 3"`
		}
		fmt.Fprintf(&b, `<line x1="10" x2="30" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="36" y="%d">%s</text>`+"\n", ly-4, ly-4, colors[li%len(colors)], dash, ly, html.EscapeString(lib))
	}
	b.WriteString("</svg>\n")
	_, err = io.WriteString(w, b.String())
	return err
}
