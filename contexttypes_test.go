package retrystack_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOneContextType: per-operation state crosses layers through one
// context type (internal/operation.Context), and no package answers a
// context key it does not own: the operation's trace reaches net/http
// through httptrace.WithClientTrace's own context. A type with a Value
// method, or a struct embedding context.Context, is a context type.
func TestOneContextType(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "bench", "integration", "stores", "tools", "testdata", "examples", "cmd":
				return filepath.SkipDir // modules of their own, and programs
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if st, ok := n.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						if sel, ok := fl.Type.(*ast.SelectorExpr); ok && len(fl.Names) == 0 && sel.Sel.Name == "Context" {
							if x, ok := sel.X.(*ast.Ident); ok && x.Name == "context" {
								found = append(found, filepath.Dir(path)+"."+n.Name.Name)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if n.Recv != nil && n.Name.Name == "Value" && len(n.Type.Params.List) == 1 {
					found = append(found, filepath.Dir(path)+"."+recvName(n)+".Value")
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	want := []string{"internal/operation.Context", "internal/operation.Context.Value"}
	if !slices.Equal(found, want) {
		t.Fatalf("context types: %v, want only %v", found, want)
	}
}

func recvName(f *ast.FuncDecl) string {
	t := f.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
