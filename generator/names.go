package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
)

// checkNames refuses output that would not compile because of names:
// oapi-codegen can declare one name twice for some specs (an enum constant
// and a type, a schema and a strict-server type), and can put methods on
// an interface type when a response schema has no type. Finding these by
// parsing is cheap; the alternative is a compiler error in the user's
// build.
func checkNames(oapiSrc []byte, m *model) error {
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
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: the generated code would not compile:", m.Spec)
	for _, p := range problems {
		msg += "\n\t" + p
	}
	return fmt.Errorf("%s\nrename the schemas or operations involved, or exclude them with oapi-codegen.output-options (include-operation-ids, exclude-schemas)", msg)
}

// layerNames are the package-level names idempotency.go.tmpl declares.
func layerNames(m *model) []string {
	names := []string{"IdempotentServer", "IdempotentHandlerOptions", "NewIdempotentHandler", "NewIdempotentStrictServer", "withIdempotencyRequest", "idempotentServer"}
	for _, op := range m.Operations {
		if op.Idempotent {
			names = append(names, op.Answer)
		}
	}
	return names
}
