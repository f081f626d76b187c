package generator

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
)

// checkNames refuses output that would not compile because of names:
// oapi-codegen can declare one name twice for some specs (an enum constant
// and a type, a schema and a strict-server type), can put methods on an
// interface type when a response schema has no type, and can refer to a
// schema it pruned (one used only by webhooks). Finding these by parsing
// is cheap; the alternative is a compiler error in the user's build.
// runOapiCodegen resolves what it can of these before (see resolve.go);
// what is left is refused here. specPath names the spec in the error; s
// is the scan of oapi-codegen's output.
func checkNames(specPath string, s *nameScan, m *model) error {
	var problems []string
	for _, name := range s.dups {
		d := s.decls[name]
		problems = append(problems, fmt.Sprintf("%s is declared twice by oapi-codegen (lines %d and %d of its output)", name, s.line(d[0].pos), s.line(d[1].pos)))
	}
	for _, im := range s.interfaceMethods {
		problems = append(problems, fmt.Sprintf("oapi-codegen declares method %s on %s, which is an interface type (a response schema without a type?)", im.method, im.recv))
	}
	for _, name := range layerNames(m) {
		if _, taken := s.declared[name]; taken {
			problems = append(problems, fmt.Sprintf("%s is declared by oapi-codegen's output and by the idempotency layer", name))
		}
	}
	clashes := len(problems)
	problems = append(problems, s.undeclared()...)
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: the generated code would not compile:", specPath)
	for _, p := range problems {
		msg += "\n\t" + p
	}
	if clashes == 0 { // each undeclared type says how to fix it
		return errors.New(msg)
	}
	return fmt.Errorf("%s\nrename the schemas or operations involved, or exclude them with oapi-codegen.output-options (include-operation-ids, exclude-schemas)", msg)
}

// nameScan is what the package-level names of oapi-codegen's output are.
type nameScan struct {
	fset *token.FileSet
	file *ast.File // nil for a prediction (predict.go)
	// list is every declaration, in the order of the output.
	list []nameDecl
	// declared holds the first declaration of each name, decls every
	// declaration of the names declared more than once, and dups those
	// names, in the order of their second declarations.
	declared map[string]token.Pos
	decls    map[string][]nameDecl
	dups     []string
	// methods are the methods whose receiver is a named type, not a
	// pointer to one; interfaceMethods those of them declared on
	// interface types.
	methods          []interfaceMethod
	interfaceMethods []interfaceMethod
}

// nameDecl is one package-level declaration.
type nameDecl struct {
	name string
	pos  token.Pos
	kind token.Token // token.TYPE, CONST, VAR or FUNC
	// For a constant: the name of its type and its value, a literal as
	// written (an enum value); "" otherwise.
	constType, constValue string
	iface                 bool // a type declared as an interface
}

type interfaceMethod struct{ recv, method string }

func (s *nameScan) line(pos token.Pos) int { return s.fset.Position(pos).Line }

// undeclared reports the type names used but not declared (see
// undeclaredTypes).
func (s *nameScan) undeclared() []string {
	return undeclaredTypes(s.fset, s.file, s.declared)
}

// scanNames parses oapi-codegen's output, the file at path, and finds its
// package-level names. Identifiers are resolved within the file, as
// parseGoFiles resolves them, so that the parse serves its checks too.
func scanNames(path string, oapiSrc []byte) (*nameScan, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, oapiSrc, 0)
	if err != nil {
		return nil, fmt.Errorf("oapi-codegen produced code that does not parse: %w", err)
	}
	return scanFile(fset, f), nil
}

// scanFile finds the package-level names of f, oapi-codegen's output
// parsed.
func scanFile(fset *token.FileSet, f *ast.File) *nameScan {
	var list []nameDecl
	var methods []interfaceMethod
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				list = append(list, nameDecl{name: d.Name.Name, pos: d.Pos(), kind: token.FUNC})
			} else if id, ok := d.Recv.List[0].Type.(*ast.Ident); ok && d.Name.Name != "" {
				methods = append(methods, interfaceMethod{recv: id.Name, method: d.Name.Name})
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					_, iface := spec.Type.(*ast.InterfaceType)
					list = append(list, nameDecl{name: spec.Name.Name, pos: spec.Pos(), kind: token.TYPE, iface: iface && spec.Assign == 0})
				case *ast.ValueSpec:
					for i, n := range spec.Names {
						nd := nameDecl{name: n.Name, pos: n.Pos(), kind: d.Tok}
						if id, ok := spec.Type.(*ast.Ident); ok && d.Tok == token.CONST {
							nd.constType = id.Name
							if i < len(spec.Values) {
								if lit, ok := spec.Values[i].(*ast.BasicLit); ok {
									nd.constValue = lit.Value
								}
							}
						}
						list = append(list, nd)
					}
				}
			}
		}
	}
	s := newNameScan(list, methods)
	s.fset, s.file = fset, f
	return s
}

// newNameScan indexes the declarations of list, in the order of the
// output, and methods, the methods on named types.
func newNameScan(list []nameDecl, methods []interfaceMethod) *nameScan {
	s := &nameScan{list: list, methods: methods, declared: make(map[string]token.Pos, len(list)), decls: map[string][]nameDecl{}}
	first := make(map[string]nameDecl, len(list))
	interfaces := map[string]bool{}
	for _, d := range list {
		if d.name == "_" {
			continue
		}
		if d.iface {
			interfaces[d.name] = true
		}
		prev, dup := first[d.name]
		if !dup {
			first[d.name] = d
			s.declared[d.name] = d.pos
			continue
		}
		if len(s.decls[d.name]) == 0 {
			s.decls[d.name] = []nameDecl{prev}
			s.dups = append(s.dups, d.name)
		}
		s.decls[d.name] = append(s.decls[d.name], d)
	}
	for _, m := range methods {
		if interfaces[m.recv] {
			s.interfaceMethods = append(s.interfaceMethods, m)
		}
	}
	return s
}

// dirty is whether the output declares a name twice or a method on an
// interface type.
func (s *nameScan) dirty() bool { return len(s.dups) > 0 || len(s.interfaceMethods) > 0 }

// fixedLayerNames are the package-level names idempotency.go.tmpl
// declares for every spec.
var fixedLayerNames = []string{"IdempotentServer", "IdempotentHandlerOptions", "NewIdempotentHandler", "NewIdempotentStrictServer", "withIdempotencyRequest", "idempotentServer"}

// layerNames are the package-level names idempotency.go.tmpl declares.
func layerNames(m *model) []string {
	names := slices.Clone(fixedLayerNames)
	if m.ErrorShape != nil {
		names = append(names, "IdempotencyErrorShape")
	}
	for _, op := range m.Operations {
		if op.Idempotent {
			names = append(names, op.Answer)
		}
		if op.Phased() {
			names = append(names, op.PointType(), op.Step(), op.Next(), op.Respond(), op.Phases())
			for _, p := range op.Points {
				names = append(names, p.Const)
			}
		}
	}
	return names
}

// checkPhaseNames reports the names a phased operation's recovery points
// make that the idempotency layer already uses: a constant named like
// another of its declarations (a point named "step" makes <Op>Step), or a
// phase method of IdempotentServer named like another method. Either
// would not compile, so each is reported at the annotation to change.
func checkPhaseNames(ops []operation) []error {
	// Every method of IdempotentServer that is not a phase method is an
	// operation's own, which oapi-codegen keeps unique; every package-level
	// name that is not a recovery point's constant is fixed or derived from
	// a unique operation name. Only the names recovery points make can
	// clash, so those are checked against everything else.
	methods := map[string]string{} // name -> what it is already
	decls := map[string]string{}   // name -> a clause saying who declares it
	for _, name := range fixedLayerNames {
		decls[name] = "the idempotency layer already declares"
	}
	for _, op := range ops {
		methods[op.GoName] = fmt.Sprintf("the method of %s %s", op.Method, op.Path)
		if op.Phased() {
			for _, name := range []string{op.PointType(), op.Step(), op.Next(), op.Respond(), op.Phases()} {
				decls[name] = fmt.Sprintf("the idempotency layer already declares for %s's phases", op.Name)
			}
		}
	}
	var errs []error
	for _, op := range ops {
		fail := func(format string, args ...any) {
			errs = append(errs, &annotation.Error{Pos: op.pos, Msg: fmt.Sprintf("x-idempotent on %s %s: ", op.Method, op.Path) + fmt.Sprintf(format, args...)})
		}
		for _, p := range op.Points {
			if other, taken := decls[p.Const]; taken {
				fail("recovery point %q makes the constant %s, which %s; expected a recovery point with another name", p.Name, p.Const, other)
			} else {
				decls[p.Const] = fmt.Sprintf("is already the constant of %s's recovery point %q", op.Name, p.Name)
			}
			if other, taken := methods[p.Phase]; taken {
				fail("recovery point %q makes the phase method %s of IdempotentServer, which is already %s; expected a recovery point or operationId that makes another name", p.Name, p.Phase, other)
			} else {
				methods[p.Phase] = fmt.Sprintf("the phase method of %s after %q", op.Name, p.Name)
			}
		}
	}
	return errs
}

// undeclaredTypes reports the package-local type names that oapi-codegen's
// type declarations and function signatures use but that nothing declares.
// oapi-codegen prunes the schemas no operation uses, yet keeps the request
// body types of webhooks, which still name them. Function bodies are not
// looked at: their identifiers may be locals.
func undeclaredTypes(fset *token.FileSet, f *ast.File, declared map[string]token.Pos) []string {
	var problems []string
	reported := map[string]bool{}
	var typeParams map[string]bool
	var inType func(n ast.Node) bool
	inType = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // a type of another package
			return false
		case *ast.Field: // field, parameter and method names are not types
			ast.Inspect(n.Type, inType)
			return false
		case *ast.Ident:
			name := n.Name
			if _, ok := declared[name]; ok || typeParams[name] || reported[name] || name == "_" {
				return false
			}
			if _, ok := types.Universe.Lookup(name).(*types.TypeName); ok {
				return false
			}
			reported[name] = true
			problems = append(problems, fmt.Sprintf("%s is used by oapi-codegen's output (line %d) but not declared, probably a schema only webhooks use, which oapi-codegen prunes; set oapi-codegen.output-options.skip-prune: true", name, fset.Position(n.Pos()).Line))
		}
		return true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			typeParams = fieldNames(d.Type.TypeParams)
			if d.Recv != nil {
				receiverTypeParams(d.Recv, typeParams)
				ast.Inspect(d.Recv, inType)
			}
			ast.Inspect(d.Type.Params, inType)
			if d.Type.Results != nil {
				ast.Inspect(d.Type.Results, inType)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					typeParams = fieldNames(s.TypeParams)
					ast.Inspect(s.Type, inType)
				case *ast.ValueSpec:
					typeParams = nil
					if s.Type != nil {
						ast.Inspect(s.Type, inType)
					}
				}
			}
		}
	}
	return problems
}

// fieldNames are the names a field list declares.
func fieldNames(list *ast.FieldList) map[string]bool {
	names := map[string]bool{}
	if list != nil {
		for _, p := range list.List {
			for _, n := range p.Names {
				names[n.Name] = true
			}
		}
	}
	return names
}

// receiverTypeParams adds to names the type parameters a method's
// receiver names in its type arguments: T in (s *Set[T]).
func receiverTypeParams(recv *ast.FieldList, names map[string]bool) {
	for _, r := range recv.List {
		t := r.Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		switch t := t.(type) {
		case *ast.IndexExpr:
			if id, ok := t.Index.(*ast.Ident); ok {
				names[id.Name] = true
			}
		case *ast.IndexListExpr:
			for _, i := range t.Indices {
				if id, ok := i.(*ast.Ident); ok {
					names[id.Name] = true
				}
			}
		}
	}
}

// undeclaredNames are the type names used but not declared.
func (s *nameScan) undeclaredNames() []string {
	var names []string
	for _, p := range s.undeclared() {
		name, _, _ := strings.Cut(p, " ")
		names = append(names, name)
	}
	return names
}

// constNamed returns the name of the constant of type typeName whose value
// is the literal lit, or "".
func (s *nameScan) constNamed(typeName, lit string) string {
	for _, d := range s.list {
		if d.kind == token.CONST && d.constType == typeName && d.constValue == lit {
			return d.name
		}
	}
	return ""
}

// resultOf returns the type name of the first result of the method of
// recv (or *recv) named method, without its *, or "".
func (s *nameScan) resultOf(recv, method string) string {
	for _, d := range s.file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != method || fn.Type.Results == nil || len(fn.Type.Results.List) == 0 {
			continue
		}
		t := fn.Recv.List[0].Type
		if star, ok := t.(*ast.StarExpr); ok {
			t = star.X
		}
		if id, ok := t.(*ast.Ident); !ok || id.Name != recv {
			continue
		}
		res := fn.Type.Results.List[0].Type
		if star, ok := res.(*ast.StarExpr); ok {
			res = star.X
		}
		if id, ok := res.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}
