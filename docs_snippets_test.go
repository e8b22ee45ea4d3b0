package retrystack_test

import (
	"flag"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateSnippets = flag.Bool("update-snippets", false, "rewrite the Go snippets of README.md and docs/*.md from their regions")

// Every Go snippet of README.md and docs/*.md is a region of a Go file
// that builds: the markdown names it on the line before the block
// (<!-- snippet: NAME -->), and the Go file holds its lines between
// "// snippet: NAME" and "// end snippet", their common indentation
// removed, in any .go file of the repository (a test, an example, a
// command, in any of its modules). A renamed or removed name breaks the
// build of that file; an edit of the snippet alone breaks this test.
// Most regions are Examples in snippets_test.go, which run. After editing
// a region: go test -run TestDocSnippetsAreCompiledCode -update-snippets .
func TestDocSnippetsAreCompiledCode(t *testing.T) {
	regions := map[string]string{} // name → text
	where := map[string]string{}   // name → file
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found := snippetRegions(t, path, string(b))
		if len(found) > 0 {
			// What a doc shows, a user can write: no internal package.
			f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if strings.Contains(imp.Path.Value, "/internal/") {
					t.Errorf("%s holds doc snippets and imports %s, which a user cannot", path, imp.Path.Value)
				}
			}
		}
		for name, text := range found {
			if prev, ok := where[name]; ok {
				t.Errorf("snippet %s is in %s and %s", name, prev, path)
			}
			regions[name], where[name] = text, path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	docs, _ := filepath.Glob("docs/*.md")
	for _, md := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		var out strings.Builder
		last := 0
		for _, m := range goBlock.FindAllStringSubmatchIndex(src, -1) {
			line := 1 + strings.Count(src[:m[0]], "\n")
			text := src[m[4]:m[5]]
			if m[2] < 0 {
				t.Errorf("%s:%d: a Go snippet with no <!-- snippet: NAME --> line before it, naming the region of a Go file that holds it:\n%s", md, line, text)
				continue
			}
			name := src[m[2]:m[3]]
			used[name] = true
			want, ok := regions[name]
			switch {
			case !ok:
				t.Errorf("%s:%d: snippet %s: no Go file has its region (// snippet: %s ... // end snippet)", md, line, name, name)
			case want != text && *updateSnippets:
				out.WriteString(src[last:m[4]])
				out.WriteString(want)
				last = m[5]
			case want != text:
				t.Errorf("%s:%d: snippet %s differs from its region in %s (go test -run TestDocSnippetsAreCompiledCode -update-snippets . copies the code over):\n%s\nthe code:\n%s", md, line, name, where[name], text, want)
			}
		}
		if last > 0 {
			out.WriteString(src[last:])
			if err := os.WriteFile(md, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range regions {
		if !used[name] {
			t.Errorf("%s: snippet %s is shown by no doc", where[name], name)
		}
	}
}

// goBlock is a fenced Go block of a markdown file, with the snippet name
// on the line before it when there is one.
var goBlock = regexp.MustCompile("(?m)(?:^<!-- snippet: ([a-z0-9-]+) -->\n)?^```go\n((?s:.*?))^```$")

// snippetRegions returns the regions of a Go file by name, each text
// without its common indentation.
func snippetRegions(t *testing.T, path, src string) map[string]string {
	out := map[string]string{}
	var name string
	var lines []string
	for i, l := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "// snippet: "):
			if name != "" {
				t.Errorf("%s:%d: snippet %s starts inside %s", path, i+1, trimmed, name)
			}
			name, lines = strings.TrimPrefix(trimmed, "// snippet: "), nil
		case trimmed == "// end snippet":
			if name == "" {
				t.Errorf("%s:%d: end of no snippet", path, i+1)
			}
			out[name] = dedent(lines)
			name = ""
		case name != "":
			lines = append(lines, l)
		}
	}
	if name != "" {
		t.Errorf("%s: snippet %s has no end", path, name)
	}
	return out
}

// dedent joins lines without their common indentation and without the
// blank lines at the end (gofmt keeps one before a closing comment).
func dedent(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		b.WriteString(strings.TrimRight(l, " \t") + "\n")
	}
	return b.String()
}
