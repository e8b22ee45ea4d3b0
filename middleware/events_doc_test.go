package middleware_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrystack/retrystack/middleware"
)

// Every event of the library that docs/architecture.md lists has its
// middleware.Event* constant, and every constant is listed: a reader can
// name in code each event the docs show.
func TestArchitectureListsTheEventConstants(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^ *\\| `(retrystack\\.[a-z_.]+)` \\|").FindAllSubmatch(doc, -1) {
		listed = append(listed, string(m[1]))
	}
	consts := []string{middleware.EventDiscarded, middleware.EventRetry, middleware.EventPitfall, middleware.EventRefusal,
		middleware.EventHedge, middleware.EventBreakerChange, middleware.EventThrottle, middleware.EventPacing}
	slices.Sort(listed)
	slices.Sort(consts)
	if diff := cmp.Diff(consts, listed); diff != "" {
		t.Errorf("events in docs/architecture.md's table (+) against the middleware.Event* constants (-):\n%s", diff)
	}
}
