package telemetry_test

import (
	"context"
	"testing"

	"github.com/retrystack/retrystack/engine"
	"github.com/retrystack/retrystack/policy"
	"github.com/retrystack/retrystack/telemetry"
)

// A classifier that reads the report so far: the operation span must
// still name the stop.
func TestStopWhenAClassifierAsksTheReport(t *testing.T) {
	p := policy.Default()
	inner := p.Classify
	p.Classify = func(a policy.Attempt) policy.Decision {
		if a.Response != nil {
			engine.ReportOf(a.Response)
		}
		return inner(a)
	}
	f := setup(t, p)
	if _, err := f.get(t, context.Background(), f.srv.URL()+"/s/200"); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.tree(t, telemetry.AttrStopReason) {
		if s.Parent == "" { // the operation span
			if got := s.Attrs[string(telemetry.AttrStopReason)]; got != string(policy.StopSuccess) {
				t.Fatalf("operation span %q: stop %q, want success", s.Name, got)
			}
		}
	}
}
