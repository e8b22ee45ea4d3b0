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

// libraryEvents are the middleware.Event* constants: the test below checks
// the list holds every one.
var libraryEvents = []string{middleware.EventDiscarded, middleware.EventRetry, middleware.EventPitfall, middleware.EventRefusal,
	middleware.EventHedge, middleware.EventBreakerChange, middleware.EventThrottle, middleware.EventPacing,
	middleware.EventLimit, middleware.EventChaos, middleware.EventGiveUp}

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
	consts := libraryEvents
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

// docs/telemetry.md's events table lists every event of the library, and
// each attribute its emitters attach: the table a user reads to query
// traces cannot miss one.
func TestTelemetryDocListsTheEvents(t *testing.T) {
	doc, err := os.ReadFile("../docs/telemetry.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(retrystack\\.[a-z_.]+)` \\| [a-z ]+ \\| (.*) \\|$").FindAllSubmatch(doc, -1) {
		rows[string(m[1])] = string(m[2])
	}
	attrs := map[string][]string{ // what each event carries (internal/protocol's comments; the emitters' code)
		middleware.EventDiscarded:     {"http.response.status_code"},
		middleware.EventRetry:         {"retrystack.retry.delay", "retrystack.retry.source", "retrystack.layer", "retrystack.retry.reason"},
		middleware.EventPitfall:       {"retrystack.pitfall.name", "retrystack.pitfall.cookies"},
		middleware.EventRefusal:       {"retrystack.stop_reason"},
		middleware.EventGiveUp:        {"retrystack.stop_reason", "retrystack.layer"},
		middleware.EventHedge:         {"retrystack.hedge"},
		middleware.EventBreakerChange: {"retrystack.breaker.key"},
		middleware.EventThrottle:      {"server.address", "server.port", "retrystack.throttle.probability"},
		middleware.EventPacing:        {"server.address", "server.port", "retrystack.pacing.outcome", "retrystack.retry.delay"},
		middleware.EventLimit:         {"retrystack.limit.key", "retrystack.limit.limit", "retrystack.limit.waited"},
		middleware.EventChaos:         {"retrystack.chaos.injected", "retrystack.chaos.fault"},
	}
	for _, event := range libraryEvents {
		if _, ok := attrs[event]; !ok {
			t.Errorf("%s: add its attributes to this test", event)
		}
	}
	for event, want := range attrs {
		row, ok := rows[event]
		if !ok {
			t.Errorf("docs/telemetry.md's events table has no row for %s", event)
			continue
		}
		for _, a := range want {
			if !strings.Contains(row, "`"+a+"`") {
				t.Errorf("docs/telemetry.md: %s's row does not name its attribute %s", event, a)
			}
		}
	}
}
