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
	want := `  stream attempt 1: http level made 3 attempts, success
  stream attempt 2: http level made 3 attempts, success
  stream attempt 3: http level made 3 attempts, success
stream level: 3 attempts, success, err=<nil>
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
