// Command doclinks reports the doc links of Go doc comments that name
// nothing: a [Name], [Type.Method] or [pkg.Name] that go/doc cannot
// resolve is printed as plain text in brackets, and a reader follows a
// link that is not there. godoc-lint v0.11.4 has no such rule (its
// no-unused-link is about link definitions), so .ci/run runs this beside
// it.
//
// Usage, in a module: doclinks [packages] (default ./...). It checks the
// doc comments of packages, exported declarations, struct fields and
// interface methods, as go doc shows them, with go/doc's own resolution:
// a name in the package, a method of one of its types, or an imported or
// standard package. Names in another package (pkg.Name) are resolved to
// the package only, as go/doc does. It exits 1 when it finds any.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// bracketed is what go/doc would take for a doc link if it resolved.
var bracketed = regexp.MustCompile(`\[\*?(?:[A-Za-z0-9_.\-]+/)*[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2}\]`)

// links returns the bracketed names in s that are neither preceded nor
// followed by a letter or digit (Faults[i] is an index, not a link).
func links(s string) []string {
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	var out []string
	for _, m := range bracketed.FindAllStringIndex(s, -1) {
		if (m[0] > 0 && word(s[m[0]-1])) || (m[1] < len(s) && word(s[m[1]])) {
			continue
		}
		out = append(out, s[m[0]:m[1]])
	}
	return out
}

func main() {
	patterns := os.Args[1:]
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclinks:", err)
		os.Exit(2)
	}
	found := 0
	for line := range strings.Lines(string(bytes.TrimSpace(out))) {
		f := strings.SplitN(strings.TrimSpace(line), "\t", 3)
		if len(f) < 3 || f[2] == "" {
			continue
		}
		problems, err := check(f[0], f[1], strings.Fields(f[2]))
		if err != nil {
			fmt.Fprintln(os.Stderr, "doclinks:", err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Println(p)
		}
		found += len(problems)
	}
	if found > 0 {
		fmt.Fprintf(os.Stderr, "doclinks: %d doc links name nothing\n", found)
		os.Exit(1)
	}
}

// check returns a line for each doc link of the package at dir that names
// nothing.
func check(importPath, dir string, names []string) ([]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	pkgPos := files[0].Package // where the package doc is, for the report
	for _, f := range files {
		if f.Doc != nil {
			pkgPos = f.Package
		}
	}
	pkg, err := doc.NewFromFiles(fset, files, importPath) // modifies files' ASTs
	if err != nil {
		return nil, err
	}
	p := pkg.Parser()
	var problems []string
	see := func(pos token.Pos, text string) {
		if text == "" {
			return
		}
		for _, bad := range unresolved(p.Parse(text).Content) {
			problems = append(problems, fmt.Sprintf("%s: doc link %s names nothing", fset.Position(pos), bad))
		}
	}
	see(pkgPos, pkg.Doc)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			see(v.Decl.Pos(), v.Doc)
			for _, s := range v.Decl.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok && ast.IsExported(vs.Names[0].Name) {
					see(vs.Pos(), vs.Doc.Text())
					see(vs.Pos(), vs.Comment.Text())
				}
			}
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			see(f.Decl.Pos(), f.Doc)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs(pkg.Funcs)
	for _, t := range pkg.Types {
		see(t.Decl.Pos(), t.Doc)
		for _, s := range t.Decl.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok {
				continue
			}
			var fields *ast.FieldList
			switch x := ts.Type.(type) {
			case *ast.StructType:
				fields = x.Fields
			case *ast.InterfaceType:
				fields = x.Methods
			}
			if fields == nil {
				continue
			}
			for _, fl := range fields.List {
				if len(fl.Names) > 0 && !ast.IsExported(fl.Names[0].Name) {
					continue
				}
				see(fl.Pos(), fl.Doc.Text())
				see(fl.Pos(), fl.Comment.Text())
			}
		}
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs)
		funcs(t.Methods)
	}
	return problems, nil
}

// unresolved returns the bracketed names left as plain text in blocks.
func unresolved(blocks []comment.Block) []string {
	var out []string
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				out = append(out, links(string(t))...)
			case comment.Italic:
				out = append(out, links(string(t))...)
			case *comment.Link:
				texts(t.Text)
			}
		}
	}
	for _, b := range blocks {
		switch b := b.(type) {
		case *comment.Paragraph:
			texts(b.Text)
		case *comment.Heading:
			texts(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				out = append(out, unresolved(it.Content)...)
			}
		}
	}
	return out
}
