package retrystack_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every program under examples/ can be copied into a user's module: it
// imports the standard library, this module's public packages, and
// well-kept third-party modules only, never an internal package.
func TestExamplesImportOnlyPublicPackages(t *testing.T) {
	thirdParty := []string{ // module path prefixes a user can depend on as well
		"go.opentelemetry.io/otel",
		"golang.org/x/time/",
		"golang.org/x/net/",
		"github.com/google/go-cmp/",
		"go.uber.org/goleak",
	}
	const module = "github.com/retrystack/retrystack"
	files := 0
	err := filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			switch {
			case !strings.Contains(first, "."): // the standard library
			case p == module || strings.HasPrefix(p, module+"/"):
				rest := strings.TrimPrefix(p, module)
				if strings.Contains(rest+"/", "/internal/") || strings.HasPrefix(rest, "/cmd/") {
					t.Errorf("%s imports %s: not a public package of the module", path, p)
				}
			default:
				ok := false
				for _, prefix := range thirdParty {
					ok = ok || strings.HasPrefix(p, prefix)
				}
				if !ok {
					t.Errorf("%s imports %s: not among the third-party modules examples may use (%v)", path, p, thirdParty)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go files under examples/")
	}
}
