package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// jaegerSpan is the part of a span in Jaeger's /api/traces answer the
// waterfall draws.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	StartTime     int64  `json:"startTime"` // µs
	Duration      int64  `json:"duration"`  // µs
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	Logs []struct {
		Timestamp int64 `json:"timestamp"`
		Fields    []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
}

// fetchTrace reads, from the Jaeger at query, the latest trace whose root
// span is named op (the lab names each scenario's root "retrylab ID").
func fetchTrace(query, op string) ([]jaegerSpan, error) {
	u := query + "/api/traces?service=retrylab&limit=1&lookback=1h&operation=" + url.QueryEscape(op)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return parseTraces(resp.Body)
}

func parseTraces(r io.Reader) ([]jaegerSpan, error) {
	var answer struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r).Decode(&answer); err != nil {
		return nil, err
	}
	if len(answer.Data) == 0 || len(answer.Data[0].Spans) == 0 {
		return nil, errors.New("no trace")
	}
	return answer.Data[0].Spans, nil
}

// waterfall draws spans as Jaeger stored them: one bar a span, under its
// parent, from its start for its duration, with the attributes that tell
// a retry's story.
func waterfall(w io.Writer, title string, spans []jaegerSpan) error {
	byID := map[string]jaegerSpan{}
	children := map[string][]jaegerSpan{}
	var roots []jaegerSpan
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for _, s := range spans {
		parent := ""
		for _, ref := range s.References {
			if ref.RefType == "CHILD_OF" {
				if _, ok := byID[ref.SpanID]; ok {
					parent = ref.SpanID
				}
			}
		}
		if parent == "" {
			roots = append(roots, s)
		} else {
			children[parent] = append(children[parent], s)
		}
	}
	byStart := func(a, b jaegerSpan) int { return int(a.StartTime - b.StartTime) }
	slices.SortFunc(roots, byStart)
	type row struct {
		s     jaegerSpan
		depth int
	}
	var rows []row
	var walk func(s jaegerSpan, depth int)
	walk = func(s jaegerSpan, depth int) {
		rows = append(rows, row{s, depth})
		kids := children[s.SpanID]
		slices.SortFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	t0, t1 := rows[0].s.StartTime, rows[0].s.StartTime
	for _, r := range rows {
		t0, t1 = min(t0, r.s.StartTime), max(t1, r.s.StartTime+r.s.Duration)
	}
	const width, labelW, rowH = 980, 420, 30
	scale := float64(width-labelW-20) / float64(max(t1-t0, 1))
	var b strings.Builder
	height := 60 + len(rows)*rowH + 30
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">0 ms</text><text x="%d" y="44" text-anchor="end" fill="#555">%.1f ms</text>`+"\n", labelW, width-20, float64(t1-t0)/1000)
	for i, r := range rows {
		y := 56 + i*rowH
		x := float64(labelW) + float64(r.s.StartTime-t0)*scale
		color := "#2e86c1"
		if r.depth == 0 {
			color = "#aab7b8"
		} else if tag(r.s, "span.kind") == "client" {
			color = "#e67e22"
		}
		if tag(r.s, "error") == "true" || tag(r.s, "otel.status_code") == "ERROR" {
			color = "#c0392b"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", 10+12*r.depth, y+12, html.EscapeString(r.s.OperationName))
		if d := details(r.s); d != "" {
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555" font-size="10">%s</text>`+"\n", 10+12*r.depth, y+24, html.EscapeString(d))
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s"/>`+"\n", x, y+2, max(float64(r.s.Duration)*scale, 1), color)
		for _, l := range r.s.Logs { // events: a backoff, a pitfall
			lx := float64(labelW) + float64(l.Timestamp-t0)*scale
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="3" fill="black"><title>%s</title></circle>`+"\n", lx, y+9, html.EscapeString(event(l.Fields)))
		}
	}
	fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">grey: the scenario · blue: an operation span · orange: an attempt span (CLIENT) · red: an error · dots: span events</text>`+"\n", height-10)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func tag(s jaegerSpan, key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// details are the attributes that tell what a span did.
func details(s jaegerSpan) string {
	var parts []string
	for _, k := range []string{"http.response.status_code", "http.request.resend_count", "retrystack.attempts", "retrystack.stop_reason", "error.type"} {
		if v := tag(s, k); v != "" {
			parts = append(parts, strings.TrimPrefix(strings.TrimPrefix(k, "retrystack."), "http.")+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

func event(fields []struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}) string {
	var parts []string
	for _, f := range fields {
		parts = append(parts, f.Key+"="+fmt.Sprint(f.Value))
	}
	return strings.Join(parts, " ")
}
