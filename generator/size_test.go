package generator_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generator is kept in pieces a reader can hold: no file of it over
// 500 lines, no function over 80, tests aside. A piece that outgrows them
// is split by meaning, as the package doc's map of stages says.
func TestSizeLimits(t *testing.T) {
	const maxFile, maxFunc = 500, 80
	for _, dir := range []string{".", "annotation"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := fset.File(f.Pos()).LineCount(); n > maxFile {
				t.Errorf("%s has %d lines, over %d: split it by what its parts do", path, n, maxFile)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFunc {
					t.Errorf("%s: %s has %d lines, over %d: give its steps functions of their own", fset.Position(fn.Pos()), fn.Name.Name, n, maxFunc)
				}
			}
		}
	}
}
