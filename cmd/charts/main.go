// Command charts draws the figures of the docs as SVG bar charts, from the
// JSON lines the lab and the benchmarks print, so a picture reruns with
// its figures:
//
//	go run ./cmd/retrylab -run '^chain/(naive|one)' -json | go run ./cmd/charts chain > docs/img/chain.svg
//	(cd bench && go run ./cmd/compare -run storm -json) | go run ./cmd/charts storm > docs/img/storm.svg
//	(cd bench && go run ./cmd/compare -run metastable -json) | go run ./cmd/charts metastable > docs/img/metastable.svg
//	(cd bench && go run ./cmd/compare -run fleet -json) | go run ./cmd/charts fleet > docs/img/fleet.svg
//	go run ./cmd/charts waterfall http://127.0.0.1:16686 seed004/503-503-200 > docs/img/retry-trace.svg
//
// The waterfall is a lab scenario's trace as a running Jaeger stored it,
// read back through Jaeger's JSON API (scripts/jaeger-e2e.sh draws it with
// TRACE_PICTURE set).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "waterfall" {
		spans, err := fetchTrace(os.Args[2], "retrylab "+os.Args[3])
		if err == nil {
			err = waterfall(os.Stdout, "The trace of lab scenario "+os.Args[3]+", as Jaeger stored it", spans)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "charts:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 || !slices.Contains([]string{"chain", "storm", "metastable", "fleet"}, os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: charts chain|storm|metastable|fleet < JSON lines > chart.svg\n       charts waterfall JAEGER_QUERY_URL SCENARIO_ID > trace.svg")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "chain":
		err = chain(os.Stdin, os.Stdout)
	case "storm":
		err = storm(os.Stdin, os.Stdout)
	case "metastable":
		err = metastable(os.Stdin, os.Stdout)
	case "fleet":
		err = fleet(os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

// lines decodes one JSON object per line into fn.
func lines(r io.Reader, fn func(map[string]json.RawMessage) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			return err
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
	return sc.Err()
}

// chain draws what S1, S2 and S3 counted in the naive chain and with
// retries at one layer.
func chain(r io.Reader, w io.Writer) error {
	counts := map[string][]float64{}
	err := lines(r, func(o map[string]json.RawMessage) error {
		var id string
		var reqs []float64
		json.Unmarshal(o["id"], &id)
		json.Unmarshal(o["server_requests"], &reqs)
		counts[id] = reqs
		return nil
	})
	if err != nil {
		return err
	}
	naive, one := counts["chain/naive-3-layers"], counts["chain/one-layer-retries"]
	if len(naive) != 3 || len(one) != 3 {
		return errors.New("want the JSON lines of chain/naive-3-layers and chain/one-layer-retries")
	}
	return draw(w, "Requests each service saw for one call: caller → S1 → S2 → S3 (S3 always 503)", []panel{{
		title:  "",
		labels: []string{"S1", "S2", "S3"},
		series: []series{{"every layer retries 3 times (chain/naive-3-layers)", "#c0392b", naive}, {"crosslayer: only the layer above the failure retries (chain/one-layer-retries)", "#2e86c1", one}},
	}})
}

// storm draws the storm rows of bench/cmd/compare: amplification and
// dials per library.
func storm(r io.Reader, w io.Writer) error {
	var libs []string
	amp, dials := map[string]float64{}, map[string]float64{}
	err := lines(r, func(o map[string]json.RawMessage) error {
		var name, lib string
		var a, d float64
		json.Unmarshal(o["name"], &name)
		json.Unmarshal(o["lib"], &lib)
		json.Unmarshal(o["amplification"], &a)
		json.Unmarshal(o["dials"], &d)
		if name != "storm-503" {
			return nil
		}
		libs = append(libs, lib)
		amp[lib], dials[lib] = a, d
		return nil
	})
	if err != nil {
		return err
	}
	if len(libs) == 0 {
		return errors.New("want the storm-503 JSON lines of bench/cmd/compare")
	}
	var a, d []float64
	for _, l := range libs {
		a, d = append(a, amp[l]), append(d, dials[l])
	}
	return draw(w, "1000 GETs, 50 at a time, to a server that always answers 503", []panel{
		{title: "requests sent per GET (amplification)", labels: libs, series: []series{{"", "#2e86c1", a}}},
		{title: "connections dialled", labels: libs, series: []series{{"", "#7d3c98", d}}},
	})
}

type series struct {
	name   string
	color  string
	values []float64
}

type panel struct {
	title  string
	labels []string
	series []series
}

// draw writes horizontal grouped bar charts, one panel under another.
func draw(w io.Writer, title string, panels []panel) error {
	const width, barH, gap = 760, 18, 10
	left := 130 // room for the labels: about 7 px a character at 12 px
	for _, p := range panels {
		for _, l := range p.labels {
			left = max(left, 7*len([]rune(l))+20)
		}
	}
	var b strings.Builder
	y := 40
	for _, p := range panels {
		if p.title != "" {
			y += 22
		}
		y += len(p.labels)*(len(p.series)*barH+gap) + 10
	}
	legend := 0
	for _, s := range panels[0].series {
		if s.name != "" {
			legend++
		}
	}
	height := y + legend*20 + 10
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	y = 40
	for _, p := range panels {
		if p.title != "" {
			y += 16
			fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y, html.EscapeString(p.title))
			y += 6
		}
		maxV := 0.0
		for _, s := range p.series {
			for _, v := range s.values {
				maxV = max(maxV, v)
			}
		}
		scale := float64(width-left-80) / max(maxV, 1)
		for i, label := range p.labels {
			fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+barH*len(p.series)/2+4, html.EscapeString(label))
			for _, s := range p.series {
				v := s.values[i]
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%s</text>`+"\n",
					left, y, max(v*scale, 1), barH-2, s.color, float64(left)+max(v*scale, 1)+4, y+barH-5, fmt.Sprint(v))
				y += barH
			}
			y += gap
		}
		y += 10
	}
	for _, s := range panels[0].series {
		if s.name == "" {
			continue
		}
		fmt.Fprintf(&b, `<rect x="10" y="%d" width="12" height="12" fill="%s"/><text x="28" y="%d">%s</text>`+"\n", y, s.color, y+10, html.EscapeString(s.name))
		y += 20
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
