package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// The faults are seeded: the same run gives the same figures.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := `observe → redirect → cookies → retry → chaos → transport
30 GETs: 27 answered 200 in 38 attempts; 11 injected 503s; the server saw 27
POST reset after it was sent (1 injected): 201 "order 1", replayed: "true"; orders written: 1
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
