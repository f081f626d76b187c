package idem_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every problem type the runtime answers has its section in
// docs/problems.md, which its URI points at.
func TestProblemTypesDocumented(t *testing.T) {
	docs, err := os.ReadFile("../docs/problems.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			bin, ok := n.(*ast.BinaryExpr)
			if !ok || bin.Op != token.ADD {
				return true
			}
			if id, ok := bin.X.(*ast.Ident); !ok || id.Name != "ProblemBase" {
				return true
			}
			lit, ok := bin.Y.(*ast.BasicLit)
			if !ok {
				return true
			}
			anchor, _ := strconv.Unquote(lit.Value)
			found++
			if !strings.Contains(string(docs), "\n## "+anchor+"\n") {
				t.Errorf("problem type %q (%s) has no section in docs/problems.md", anchor, name)
			}
			return true
		})
	}
	if found < 10 {
		t.Fatalf("found %d problem types; the test no longer finds them", found)
	}
}
