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
