package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// goPackage is the Go files of the output in one directory, parsed.
type goPackage struct {
	dir   string
	fset  *token.FileSet
	files []*goFile
}

// goFile is one parsed Go file of the output.
type goFile struct {
	path string // as in File.Path
	src  []byte
	ast  *ast.File
}

// parseGoFiles parses the Go files among files, by directory, in order.
// Identifiers are resolved within each file, which tells package
// qualifiers from local names. parsed, when not nil, is one of them
// parsed already, by its path, whose file set the others join.
func parseGoFiles(files []File, parsed *nameScan) ([]*goPackage, error) {
	fset := token.NewFileSet()
	if parsed != nil {
		fset = parsed.fset
	}
	var pkgs []*goPackage
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		var file *ast.File
		if parsed != nil && fset.File(parsed.file.Pos()).Name() == f.Path {
			file = parsed.file
		} else {
			var err error
			if file, err = parser.ParseFile(fset, f.Path, f.Content, 0); err != nil {
				return nil, fmt.Errorf("%s does not parse%s: %w", f.Path, generatorBug, err)
			}
		}
		dir := filepath.Dir(f.Path)
		i := slices.IndexFunc(pkgs, func(p *goPackage) bool { return p.dir == dir })
		if i < 0 {
			i = len(pkgs)
			pkgs = append(pkgs, &goPackage{dir: dir, fset: fset})
		}
		pkgs[i].files = append(pkgs[i].files, &goFile{path: f.Path, src: f.Content, ast: file})
	}
	return pkgs, nil
}

// checkCompile refuses generated Go code that would not compile for a
// reason parsing can find: files of one directory in different packages,
// a name declared twice in a package, a package qualifier that nothing
// imports or declares, and an import that nothing uses. These are bugs of
// idemgen's templates, or names of the spec that collide with the
// generated ones, and would otherwise reach the user's build as compiler
// errors in code they cannot edit. It costs a parse, not a compile.
// specPath names the spec in the error.
func checkCompile(specPath string, pkgs []*goPackage) error {
	var problems []string
	for _, p := range pkgs {
		problems = append(problems, p.problems()...)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the generated code would not compile:\n\t%s", specPath, strings.Join(problems, "\n\t"))
}

// generatorBug ends the description of a problem that only idemgen's own
// code can cause.
const generatorBug = " (a generator bug; please report it with your spec)"

func (p *goPackage) problems() []string {
	var problems []string
	at := func(pos token.Pos) string {
		position := p.fset.Position(pos)
		return fmt.Sprintf("%s:%d:%d", position.Filename, position.Line, position.Column)
	}
	name := p.files[0].ast.Name
	for _, f := range p.files[1:] {
		if f.ast.Name.Name != name.Name {
			problems = append(problems, fmt.Sprintf("%s: package %s, but %s is package %s"+generatorBug, at(f.ast.Name.Pos()), f.ast.Name.Name, p.files[0].path, name.Name))
		}
	}
	decls := p.declarations(func(name string, first, again token.Pos) {
		problems = append(problems, fmt.Sprintf("%s: %s is declared again, first at %s; rename the schema or operation that makes the name, or exclude it with oapi-codegen.output-options", at(again), name, at(first)))
	})
	for _, f := range p.files {
		problems = append(problems, f.importProblems(at, decls)...)
	}
	return problems
}

// declarations returns the package-level names of the package, calling
// twice for each name, or method of a type, declared again.
func (p *goPackage) declarations(twice func(name string, first, again token.Pos)) map[string]token.Pos {
	decls := map[string]token.Pos{}
	declare := func(name string, pos token.Pos) {
		if name == "_" || name == "init" {
			return
		}
		if first, dup := decls[name]; dup {
			twice(name, first, pos)
			return
		}
		decls[name] = pos
	}
	for _, f := range p.files {
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declare(d.Name.Name, d.Name.Pos())
				} else if recv := receiverType(d.Recv.List[0].Type); recv != "" {
					// Methods are kept apart from package-level names
					// by the dot, which no identifier has.
					declare(recv+"."+d.Name.Name, d.Name.Pos())
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declare(s.Name.Name, s.Name.Pos())
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declare(n.Name, n.Pos())
						}
					}
				}
			}
		}
	}
	return decls
}

// receiverType is the name of a method's receiver type: T of T, *T, T[X]
// and *T[X].
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch t := e.(type) {
	case *ast.IndexExpr:
		e = t.X
	case *ast.IndexListExpr:
		e = t.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// goImport is one import of a file: the name the file uses it by, and its
// spec as written.
type goImport struct {
	name    string // the alias, or the name the path suggests (importName)
	aliased bool
	path    string
	pos     token.Pos
}

func (i goImport) spec() string {
	if i.aliased {
		return i.name + " " + strconv.Quote(i.path)
	}
	return strconv.Quote(i.path)
}

func (f *goFile) imports() []goImport {
	var imports []goImport
	for _, s := range f.ast.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			continue // the parser accepted it, so it does not happen
		}
		i := goImport{name: importName(p), path: p, pos: s.Pos()}
		if s.Name != nil {
			i.name, i.aliased = s.Name.Name, true
		}
		imports = append(imports, i)
	}
	return imports
}

// importName is the name a package is assumed to declare when an import
// of it gives none: the last element of its path without a major version
// suffix (/v2, .v3) or a go- prefix or -go suffix, as goimports assumes.
func importName(importPath string) string {
	base := path.Base(importPath)
	if isMajorVersion(base) && path.Dir(importPath) != "." {
		base = path.Base(path.Dir(importPath))
	}
	if i := strings.LastIndex(base, ".v"); i > 0 && isMajorVersion(base[i+1:]) {
		base = base[:i]
	}
	base = strings.TrimPrefix(base, "go-")
	base = strings.TrimSuffix(base, "-go")
	return strings.NewReplacer("-", "_", ".", "_").Replace(base)
}

func isMajorVersion(s string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "v"))
	return strings.HasPrefix(s, "v") && err == nil && n >= 1
}

// qualifiers returns the package qualifiers f uses, with the first
// position of each: the X of every X.Sel whose X is not a name the file
// or the package declares (decls), nor one of Go's own.
func (f *goFile) qualifiers(decls map[string]token.Pos) (names []string, first map[string]token.Pos) {
	first = map[string]token.Pos{}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		// The parser's resolution of names within the file tells locals
		// from qualifiers without type-checking.
		if id.Obj != nil {
			return true // a name declared in the file
		}
		if _, ok := decls[id.Name]; ok || types.Universe.Lookup(id.Name) != nil {
			return true
		}
		if _, seen := first[id.Name]; !seen {
			first[id.Name] = id.Pos()
			names = append(names, id.Name)
		}
		return true
	})
	return names, first
}

// importProblems reports the qualifiers f uses but does not import, and
// the imports it does not use. An import without a name may name its
// package otherwise than its path suggests: while f has one it does not
// seem to use, a qualifier it does not seem to import is taken to be
// that package, and the import is reported only when f uses no such
// qualifier.
func (f *goFile) importProblems(at func(token.Pos) string, decls map[string]token.Pos) []string {
	imports := f.imports()
	byName := map[string]bool{}
	for _, i := range imports {
		if i.name == "." {
			return nil // anything may come from it
		}
		byName[i.name] = true
	}
	qualifiers, first := f.qualifiers(decls)
	used := map[string]bool{}
	var undefined []string
	for _, q := range qualifiers {
		used[q] = true
		if !byName[q] {
			undefined = append(undefined, q)
		}
	}
	var unused []goImport
	unsure := false
	for _, i := range imports {
		if i.name == "_" || i.path == "C" || used[i.name] {
			continue
		}
		unused = append(unused, i)
		unsure = unsure || !i.aliased
	}
	var problems []string
	if !unsure {
		for _, q := range undefined {
			problems = append(problems, fmt.Sprintf("%s: undefined: %s, a package the file does not import"+generatorBug, at(first[q]), q))
		}
	}
	for _, i := range unused {
		if !i.aliased && len(undefined) > 0 {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: %s imported and not used"+generatorBug, at(i.pos), i.spec()))
	}
	return problems
}
