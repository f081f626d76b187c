package generator

import (
	"fmt"
	"go/ast"
	"strings"

	"github.com/idemgen/idemgen/idem"
)

// keyReader writes the function that reads op's key from the typed
// request, at the places the annotation's key names, and returns its
// name: one idem.KeyValue per source, present when the request has it.
// Reading the typed request rather than the raw one gives the value the
// handler sees, and needs no second parse of the body.
func (g *canonicalGen) keyReader(op *operation) (string, error) {
	name := g.unusedName(lowerFirst(op.GoName) + "Key")
	g.request = op.GoName + "RequestObject"
	var b strings.Builder
	fmt.Fprintf(&b, "\n// %s reads the key of a request to %s %s.\n", name, op.Name, op.KeyDoc)
	fmt.Fprintf(&b, "func %s(request %s) []idem.KeyValue {\n\tkey := make([]idem.KeyValue, %d)\n", name, g.request, len(op.KeyFrom))
	for i, k := range op.KeyFrom {
		expr, tokens := k.expr, k.tokens
		if k.In == "body" {
			expr = "request.Body"
		}
		t := g.exprType(expr)
		if t == nil {
			return "", fmt.Errorf("%s: oapi-codegen's request object has no %s", op.Name, expr)
		}
		if err := g.keyValue(&b, i, expr, t, tokens, 1); err != nil {
			return "", fmt.Errorf("%s: key %s: %w", op.Name, describeKeySource(k), err)
		}
	}
	b.WriteString("\treturn key\n}\n")
	g.funcs.WriteString(b.String())
	return name, nil
}

// keyValue writes the statements that set key[i] from e of type t,
// following tokens, the JSON names of struct fields, and checking each
// pointer on the way.
func (g *canonicalGen) keyValue(b *strings.Builder, i int, e string, t ast.Expr, tokens []string, depth int) error {
	indent := strings.Repeat("\t", depth)
	if star, ok := g.underlying(t).(*ast.StarExpr); ok {
		v := fmt.Sprintf("v%d", depth)
		fmt.Fprintf(b, "%sif %s := %s; %s != nil {\n", indent, v, e, v)
		e, t = v, star.X
		if len(tokens) == 0 {
			e = "*" + v
		}
		if err := g.keyValue(b, i, e, t, tokens, depth+1); err != nil {
			return err
		}
		fmt.Fprintf(b, "%s}\n", indent)
		return nil
	}
	if len(tokens) > 0 {
		st, ok := g.underlying(t).(*ast.StructType)
		if !ok {
			return fmt.Errorf("%s is not a struct", e)
		}
		fields, _ := g.jsonFields(st)
		for _, f := range fields {
			if f.name == tokens[0] {
				return g.keyValue(b, i, field(e, f.goName), f.typ, tokens[1:], depth)
			}
		}
		return fmt.Errorf("the Go type of %s has no field for %q", e, tokens[0])
	}
	value, err := g.keyText(e, t)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "%skey[%d] = idem.KeyValue{Value: %s, Present: true}\n", indent, i, value)
	return nil
}

// keyText is the expression of e's value as key text: a string as it
// is, an integer in decimal, a UUID in its canonical form. e may be a
// pointer's dereference, *v, whose methods v has too.
func (g *canonicalGen) keyText(e string, t ast.Expr) (string, error) {
	method := strings.TrimPrefix(e, "*")
	switch u := g.underlying(t).(type) {
	case *ast.Ident:
		switch predeclared[u.Name] {
		case "String":
			if g.alias(t) != "string" {
				return "string(" + e + ")", nil
			}
			return e, nil
		case "Int":
			return "strconv.FormatInt(int64(" + e + "), 10)", nil
		case "Uint":
			return "strconv.FormatUint(uint64(" + e + "), 10)", nil
		}
	case *ast.SelectorExpr:
		if u.Sel.Name == "UUID" {
			return method + ".String()", nil
		}
	case *ast.ArrayType:
		if u.Len != nil && g.isByte(u.Elt) { // a UUID declared in the package
			return method + ".String()", nil
		}
	}
	return "", fmt.Errorf("%s is of a Go type that is not a string, an integer or a UUID", e)
}

// describeKeySource words a key source for comments and messages, as
// the runtime's answers word it.
func describeKeySource(k keySource) string {
	return idem.KeySource{In: k.In, Name: k.Name}.String()
}
