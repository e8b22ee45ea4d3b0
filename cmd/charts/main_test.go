package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestChain(t *testing.T) {
	in := `{"id":"chain/naive-3-layers","server_requests":[3,9,27]}
{"id":"chain/one-layer-retries","server_requests":[1,1,3]}
`
	var out bytes.Buffer
	if err := chain(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	svg := out.String()
	for _, want := range []string{"<svg", ">27</text>", ">3</text>", "chain/one-layer-retries", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if err := chain(strings.NewReader(`{"id":"seed000/x","server_requests":[1]}`), &out); err == nil {
		t.Error("a chart without the chain rows")
	}
}

func TestStorm(t *testing.T) {
	in := `{"name":"storm-503","lib":"retrystack","amplification":1.1,"dials":50}
{"name":"storm-503","lib":"go-retryablehttp","amplification":5,"dials":3946}
{"name":"storm-500","lib":"retrystack","amplification":1.1,"dials":62}
`
	var out bytes.Buffer
	if err := storm(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if svg := out.String(); !strings.Contains(svg, ">3946</text>") || !strings.Contains(svg, ">1.1</text>") || strings.Contains(svg, ">62</text>") {
		t.Errorf("storm chart:\n%s", svg)
	}
}

func TestWaterfall(t *testing.T) {
	in := `{"data":[{"spans":[
{"spanID":"r","operationName":"retrylab seed004/503-503-200","startTime":1000,"duration":90000,"references":[],"tags":[]},
{"spanID":"o","operationName":"GET","startTime":1100,"duration":80000,"references":[{"refType":"CHILD_OF","spanID":"r"}],"tags":[{"key":"retrystack.stop_reason","value":"success"},{"key":"retrystack.attempts","value":3}],
 "logs":[{"timestamp":20000,"fields":[{"key":"event","value":"retrystack.retry.backoff"}]}]},
{"spanID":"a2","operationName":"GET","startTime":50000,"duration":1000,"references":[{"refType":"CHILD_OF","spanID":"o"}],"tags":[{"key":"span.kind","value":"client"},{"key":"http.response.status_code","value":503},{"key":"http.request.resend_count","value":1}]},
{"spanID":"a1","operationName":"GET","startTime":1200,"duration":1000,"references":[{"refType":"CHILD_OF","spanID":"o"}],"tags":[{"key":"span.kind","value":"client"},{"key":"http.response.status_code","value":503}]}
]}]}`
	spans, err := parseTraces(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := waterfall(&out, "t", spans); err != nil {
		t.Fatal(err)
	}
	svg := out.String()
	// Rows in order: the root, the operation, the attempts by start time.
	iRoot, iOp := strings.Index(svg, "retrylab seed004"), strings.Index(svg, "stop_reason=success")
	iA1, iA2 := strings.Index(svg, "response.status_code=503<"), strings.Index(svg, "resend_count=1")
	if iRoot < 0 || iOp < iRoot || iA1 < iOp || iA2 < iA1 || !strings.Contains(svg, "<circle") {
		t.Errorf("waterfall:\n%s", svg)
	}
	if _, err := parseTraces(strings.NewReader(`{"data":[]}`)); err == nil {
		t.Error("an empty answer drew a trace")
	}
}

func TestFleet(t *testing.T) {
	in := `{"name":"fleet","lib":"retrystack","clients":1,"rate":600,"warmup":"10 s","recovered_ms":100}
{"name":"fleet","lib":"retrystack","clients":1000,"rate":600,"warmup":"10 s","recovered_ms":0}
{"name":"fleet","lib":"tower","clients":1000,"rate":600,"warmup":"10 s"}
{"name":"fleet","lib":"tower","clients":1000,"rate":600,"warmup":"1 s","recovered_ms":0}
{"name":"fleet-small-clients","lib":"retrystack","clients":1000,"success_pct":99.99}
`
	var out bytes.Buffer
	if err := fleet(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	svg := out.String()
	for _, want := range []string{"<svg", "600 operations a second", ">never</text>", ">retrystack</text>", ">tower</text>", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if strings.Count(svg, "<polyline") != 2 {
		t.Errorf("want one line per library at one rate:\n%s", svg)
	}
	if err := fleet(strings.NewReader(`{"name":"metastable","lib":"x"}`), &out); err == nil {
		t.Error("a chart without fleet rows")
	}
}
