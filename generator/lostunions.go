package generator

import (
	"fmt"
	"go/ast"

	"github.com/idemgen/idemgen/generator/annotation"
)

// checkDecodes refuses an operation whose typed body holds a union that
// oapi-codegen declares without an UnmarshalJSON method (it does so for a
// nullable discriminated union: anyOf of a discriminated oneOf and null).
// Such a member decodes to nothing, in the handler and in the
// fingerprint alike, so two requests that differ only in it would be one
// request to the protocol, and the second would replay the first's
// answer. g.request must be op's request type (operation sets it).
func (g *canonicalGen) checkDecodes(op *operation) error {
	for _, p := range op.Fingerprint.Body {
		if isFormBody(p.Expr) || p.Expr == multipartBody {
			continue
		}
		if name := g.lostUnion(g.exprType(p.Expr), map[string]bool{}); name != "" {
			return &annotation.Error{Pos: op.pos, Msg: fmt.Sprintf("x-idempotent on %s %s: the request body holds %s, a union that oapi-codegen declares without JSON methods (it does so for an anyOf of a discriminated oneOf and null), so it would decode to nothing, and two requests that differ only in it would replay one answer; refer to the inner discriminated union by $ref instead of the anyOf with null (a property left out of required may be absent), or leave the operation unannotated", op.Method, op.Path, name)}
		}
	}
	return nil
}

// lostUnion returns the first type reachable from t, through fields,
// pointers, slices and maps, that oapi-codegen declares as a union (a
// struct holding the raw JSON in an unexported field, union) without an
// UnmarshalJSON method; "" when there is none.
func (g *canonicalGen) lostUnion(t ast.Expr, seen map[string]bool) string {
	switch x := t.(type) {
	case *ast.ParenExpr:
		return g.lostUnion(x.X, seen)
	case *ast.StarExpr:
		return g.lostUnion(x.X, seen)
	case *ast.ArrayType:
		return g.lostUnion(x.Elt, seen)
	case *ast.MapType:
		return g.lostUnion(x.Value, seen)
	case *ast.Ident:
		ts, ok := g.types[x.Name]
		if !ok || seen[x.Name] || g.unmarshalers[x.Name] {
			return ""
		}
		seen[x.Name] = true
		if st, ok := ts.Type.(*ast.StructType); ok && holdsUnion(st) {
			return x.Name
		}
		return g.lostUnion(ts.Type, seen)
	case *ast.StructType:
		for _, f := range x.Fields.List {
			if name := g.lostUnion(f.Type, seen); name != "" {
				return name
			}
		}
	}
	return ""
}

// holdsUnion reports whether st is oapi-codegen's union: a field named
// union of type json.RawMessage.
func holdsUnion(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		sel, ok := f.Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "RawMessage" {
			continue
		}
		for _, n := range f.Names {
			if n.Name == "union" {
				return true
			}
		}
	}
	return false
}
