package generator

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"

	"github.com/idemgen/idemgen/generator/annotation"
)

// checkNames refuses output that would not compile because of names:
// oapi-codegen can declare one name twice for some specs (an enum constant
// and a type, a schema and a strict-server type), can put methods on an
// interface type when a response schema has no type, and can refer to a
// schema it pruned (one used only by webhooks). Finding these by parsing
// is cheap; the alternative is a compiler error in the user's build.
// specPath names the spec in the error.
func checkNames(specPath string, oapiSrc []byte, m *model) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "oapi.gen.go", oapiSrc, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("oapi-codegen produced code that does not parse: %w", err)
	}
	declared := map[string]token.Pos{}
	interfaces := map[string]bool{}
	var problems []string
	declare := func(name string, pos token.Pos) {
		if name == "_" {
			return
		}
		if first, dup := declared[name]; dup {
			problems = append(problems, fmt.Sprintf("%s is declared twice by oapi-codegen (lines %d and %d of its output)", name, fset.Position(first).Line, fset.Position(pos).Line))
			return
		}
		declared[name] = pos
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declare(d.Name.Name, d.Pos())
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					declare(s.Name.Name, s.Pos())
					if _, ok := s.Type.(*ast.InterfaceType); ok && s.Assign == 0 {
						interfaces[s.Name.Name] = true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declare(n.Name, n.Pos())
					}
				}
			}
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok && interfaces[id.Name] && fn.Name.Name != "" {
			problems = append(problems, fmt.Sprintf("oapi-codegen declares method %s on %s, which is an interface type (a response schema without a type?)", fn.Name.Name, id.Name))
		}
	}
	for _, name := range layerNames(m) {
		if _, taken := declared[name]; taken {
			problems = append(problems, fmt.Sprintf("%s is declared by oapi-codegen's output and by the idempotency layer", name))
		}
	}
	clashes := len(problems)
	problems = append(problems, undeclaredTypes(fset, f, declared)...)
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

// fixedLayerNames are the package-level names idempotency.go.tmpl
// declares for every spec.
var fixedLayerNames = []string{"IdempotentServer", "IdempotentHandlerOptions", "NewIdempotentHandler", "NewIdempotentStrictServer", "withIdempotencyRequest", "idempotentServer"}

// layerNames are the package-level names idempotency.go.tmpl declares.
func layerNames(m *model) []string {
	names := slices.Clone(fixedLayerNames)
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
	params := func(list *ast.FieldList) map[string]bool {
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
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			typeParams = params(d.Type.TypeParams)
			if d.Recv != nil {
				for _, r := range d.Recv.List {
					// A receiver's type arguments name the type parameters.
					t := r.Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					switch t := t.(type) {
					case *ast.IndexExpr:
						if id, ok := t.Index.(*ast.Ident); ok {
							typeParams[id.Name] = true
						}
					case *ast.IndexListExpr:
						for _, i := range t.Indices {
							if id, ok := i.(*ast.Ident); ok {
								typeParams[id.Name] = true
							}
						}
					}
				}
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
					typeParams = params(s.TypeParams)
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
