package middleware_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrystack/retrystack/middleware"
)

// FuzzStackConfig builds stacks from arbitrary names and edits them by
// arbitrary names: typed errors, never a panic, and names stay unique.
func FuzzStackConfig(f *testing.F) {
	f.Add("redirect,cookies,retry", "cookies", "retry", "otel")
	f.Add("a,a", "a", "b", "")
	f.Add(",transport, x", "transport", "", "y,z")
	f.Fuzz(func(t *testing.T, names, a, b, extra string) {
		var layers []middleware.Layer
		for _, n := range strings.Split(names, ",") {
			layers = append(layers, pass(n))
		}
		s, err := middleware.NewStack(layers...)
		if err != nil {
			assertTyped(t, err)
			return
		}
		for _, edit := range []func() (middleware.Stack, error){
			func() (middleware.Stack, error) { return s.Swap(a, b) },
			func() (middleware.Stack, error) { return s.Without(a) },
			func() (middleware.Stack, error) { return s.InsertBefore(a, pass(extra)) },
			func() (middleware.Stack, error) { return s.InsertAfter(b, pass(extra)) },
			func() (middleware.Stack, error) { return s.Select(strings.Split(extra, ",")...) },
		} {
			got, err := edit()
			if err != nil {
				assertTyped(t, err)
				continue
			}
			seen := map[string]bool{}
			for _, n := range got.Names() {
				if seen[n] {
					t.Fatalf("duplicate %q in %v", n, got.Names())
				}
				seen[n] = true
			}
		}
	})
}

func assertTyped(t *testing.T, err error) {
	t.Helper()
	if _, ok := errors.AsType[*middleware.LayerError](err); !ok {
		t.Fatalf("untyped error %T: %v", err, err)
	}
}
