package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := `redirect → cookies → retry → limit → transport
40 GETs at once: 40 answered, the service held at most 4 at once
a fifth, 10 ms deadline: stop concurrency-limited, sent to the service: 0
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
