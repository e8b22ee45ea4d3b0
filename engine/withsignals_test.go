package engine

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// withSignals is http.Header.Clone followed by setting (or deleting) the
// two cross-layer headers, without the map growing or a slice per value;
// the copy shares nothing with the original.
func TestWithSignals(t *testing.T) {
	const a, tm = "Retrystack-Attempt", "Retrystack-Timeout-Ms"
	for _, h := range []http.Header{
		nil,
		{},
		{"Accept": {"a", "b"}, "User-Agent": nil},
		{a: {"9; max=9"}, tm: {"1"}, "X": {"x"}},
		{a: nil},
	} {
		for _, c := range []struct {
			attempt, timeout string
			set              bool
		}{{"2; max=3", "150", true}, {"", "150", true}, {"2; max=3", "", true}, {"", "", true}, {"2; max=3", "150", false}} {
			want := h.Clone()
			if want == nil {
				want = http.Header{}
			}
			if c.set {
				for name, v := range map[string]string{a: c.attempt, tm: c.timeout} {
					if v == "" {
						delete(want, name)
					} else {
						want[name] = []string{v}
					}
				}
			}
			got := withSignals(h, a, c.attempt, tm, c.timeout, c.set)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%v %+v (-want +got):\n%s", h, c, diff)
			}
			for k, v := range got {
				if len(v) > 0 {
					v[0] = "changed"
				}
				if hv := h[k]; len(hv) > 0 && hv[0] == "changed" {
					t.Fatalf("the copy shares %s with the original", k)
				}
			}
		}
	}
}
