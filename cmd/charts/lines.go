package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"
)

// metastable draws the goodput over time of each client of the
// metastable-failure experiment (bench/cmd/compare -run metastable), the
// trigger shaded: from 1 s to 2 s, in buckets of 100 ms.
func metastable(r io.Reader, w io.Writer) error {
	var all []series
	colors := []string{"#c0392b", "#2e86c1", "#1e8449", "#d68910", "#7d3c98", "#17a589", "#566573", "#a04000", "#f1c40f", "#85929e"}
	err := lines(r, func(o map[string]json.RawMessage) error {
		var name, lib string
		var goodput []float64
		json.Unmarshal(o["name"], &name)
		json.Unmarshal(o["lib"], &lib)
		json.Unmarshal(o["goodput"], &goodput)
		if name != "metastable" || len(goodput) == 0 {
			return nil
		}
		all = append(all, series{lib, colors[len(all)%len(colors)], goodput})
		return nil
	})
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return errors.New("want the metastable JSON lines of bench/cmd/compare")
	}
	const width, left, top, plotH = 760, 50, 40, 260
	n := 0
	for _, s := range all {
		n = max(n, len(s.values))
	}
	plotW := width - left - 20
	x := func(i float64) float64 { return float64(left) + i*float64(plotW)/float64(n) }
	y := func(v float64) float64 { return float64(top) + (1-v)*plotH }
	var b strings.Builder
	h := top + plotH + 40 + 20*len(all)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n",
		html.EscapeString("Goodput over time: the share of operations started in each 100 ms that succeeded"))
	// the trigger: capacity at 40 % from 1 s to 2 s
	fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f2d7d5"/><text x="%.1f" y="%d">trigger: 40 %% capacity</text>`+"\n",
		x(10), top, x(20)-x(10), plotH, x(10)+4, top+14)
	for _, v := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ccc"/><text x="10" y="%.1f">%.0f %%</text>`+"\n", left, left+plotW, y(v), y(v), y(v)+4, v*100)
	}
	for s := 0; s <= n/10; s++ {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%d s</text>`+"\n", x(float64(s*10))-6, top+plotH+16, s)
	}
	for i, s := range all {
		var pts []string
		for j, v := range s.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(j)+0.5), y(v)))
		}
		dash := ""
		if i%2 == 1 {
			dash = ` stroke-dasharray="6 3"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		ly := top + plotH + 36 + 20*i
		fmt.Fprintf(&b, `<line x1="10" x2="30" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="36" y="%d">%s</text>`+"\n", ly-4, ly-4, s.color, dash, ly, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	_, err = io.WriteString(w, b.String())
	return err
}
