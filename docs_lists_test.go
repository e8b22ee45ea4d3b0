package retrystack_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// packageDirs are the folders of the repository that hold a package a
// reader may meet (internal/ and tools/ aside): "." for the root.
func packageDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch path {
			case "internal", "tools", ".git":
				return filepath.SkipDir
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.Dir(path); !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// section is the text of the markdown section headed heading, up to the
// next heading of its level or above.
func section(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no %q", file, heading)
	}
	s = s[i+len(heading)+2:]
	level := heading[:strings.IndexByte(heading, ' ')+1]
	for _, h := range []string{"\n# ", "\n## ", "\n### "} {
		if len(h)-1 > len(level) {
			break
		}
		if j := strings.Index(s, h); j >= 0 {
			s = s[:j]
		}
	}
	return s
}

// covered reports whether one of names (the backticked names of a doc's
// list) names dir: the folder itself, or a module or tree it is in
// ("bench/", "internal/...").
func covered(dir string, names []string) bool {
	if dir == "." {
		dir = "retrystack"
	}
	for _, n := range names {
		n = strings.TrimSuffix(n, "...")
		if n == dir || n == dir+"/" || (strings.HasSuffix(n, "/") && strings.HasPrefix(dir+"/", n)) {
			return true
		}
	}
	return false
}

var backticked = regexp.MustCompile("`([a-z][a-z0-9/.]*)`")

func names(text string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// README's layout table names every package folder, and
// docs/architecture.md's package map every package a program imports:
// a package added without a line in either fails here.
func TestDocsListEveryPackage(t *testing.T) {
	layout := names(section(t, "README.md", "## Layout"))
	packages := names(section(t, "docs/architecture.md", "## Packages"))
	for _, dir := range packageDirs(t) {
		if !covered(dir, layout) {
			t.Errorf("README.md's Layout does not name %s", dir)
		}
		library := !strings.HasPrefix(dir, "examples/") && !strings.HasPrefix(dir, "cmd/") &&
			!strings.HasPrefix(dir, "bench") && !strings.HasPrefix(dir, "integration") && dir != "."
		if library && !covered(dir, packages) {
			t.Errorf("docs/architecture.md's Packages does not name %s", dir)
		}
	}
}

// The library's layers, as docs/architecture.md's Layout lists them, are
// every package with a Layer function.
func TestArchitectureListsTheLayers(t *testing.T) {
	var lib string
	for line := range strings.SplitSeq(section(t, "docs/architecture.md", "## Layout"), "\n- ") {
		if strings.HasPrefix(line, "**The library**") {
			lib = line
		}
	}
	if lib == "" {
		t.Fatal(`docs/architecture.md's Layout has no "**The library**" item`)
	}
	listed := names(lib)
	for _, dir := range packageDirs(t) {
		src, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range src {
			if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			layer := regexp.MustCompile(`(?m)^func (\([^)]*\) )?(Layer|Operation)\(`).Match(b)
			if layer && !strings.HasPrefix(dir, "examples/") && !strings.HasPrefix(dir, "internal") && dir != "." && dir != "middleware" &&
				!slices.Contains(listed, dir) {
				t.Errorf("%s has a layer; docs/architecture.md's Layout does not list it among the layers", dir)
			}
		}
	}
}

// constValues are the string values of the constants of type typ declared
// in file: the list the code holds.
func constValues(t *testing.T, file, typ string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					out = append(out, strings.Trim(lit.Value, `"`))
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants in %s", typ, file)
	}
	return out
}

// docs/telemetry.md's table of stop reasons has a row for every
// policy.StopReason, and the pitfalls are each in docs/pitfalls.md and in
// the telemetry events table's pitfall names: lists a reader relies on
// come from the code.
func TestDocsListStopReasonsAndPitfalls(t *testing.T) {
	stops := section(t, "docs/telemetry.md", "## Stop reasons")
	for _, s := range constValues(t, "policy/decision.go", "StopReason") {
		if !strings.Contains(stops, "| `"+s+"` |") {
			t.Errorf("docs/telemetry.md's Stop reasons has no row for %s", s)
		}
	}
	events := section(t, "docs/telemetry.md", "## Events")
	pitfalls, err := os.ReadFile("docs/pitfalls.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range constValues(t, "engine/report.go", "Pitfall") {
		if !strings.Contains(events, "`"+p+"`") {
			t.Errorf("docs/telemetry.md's events table does not name the pitfall %s", p)
		}
		if !strings.Contains(string(pitfalls), "`"+p+"`") {
			t.Errorf("docs/pitfalls.md does not name the pitfall %s", p)
		}
	}
}
