package middleware_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
		middleware.EventHedge, middleware.EventBreakerChange, middleware.EventThrottle, middleware.EventPacing,
		middleware.EventLimit, middleware.EventChaos, middleware.EventGiveUp}
	// The list above must hold every Event* constant of the package.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, sp := range g.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Event") {
							declared++
						}
					}
				}
			}
		}
	}
	if declared != len(consts) {
		t.Fatalf("the package declares %d Event* constants; the test lists %d", declared, len(consts))
	}
	slices.Sort(listed)
	slices.Sort(consts)
	if diff := cmp.Diff(consts, listed); diff != "" {
		t.Errorf("events in docs/architecture.md's table (+) against the middleware.Event* constants (-):\n%s", diff)
	}
}
