package generator

import (
	"go/ast"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// exprType is the type of request.Field or request.Params.Field.
func (g *canonicalGen) exprType(expr string) ast.Expr {
	var t ast.Expr = ast.NewIdent(g.request)
	for _, f := range strings.Split(expr, ".")[1:] {
		st, ok := g.underlying(t).(*ast.StructType)
		if !ok {
			return nil
		}
		t = nil
		for _, field := range st.Fields.List {
			for _, n := range field.Names {
				if n.Name == f {
					t = field.Type
				}
			}
		}
		if t == nil {
			return nil
		}
	}
	return t
}

// underlying resolves a type to its underlying type expression, through
// aliases, defined types and parentheses. A type from another package is
// returned as its selector; a generic instantiation as itself.
func (g *canonicalGen) underlying(t ast.Expr) ast.Expr {
	for range 100 { // a cycle of declarations would not compile
		switch x := t.(type) {
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.Ident:
			if ts, ok := g.types[x.Name]; ok && ts.TypeParams == nil {
				t = ts.Type
				continue
			}
		}
		return t
	}
	return t
}

// marshals reports whether t, named in this package, encodes itself, and
// whether through a pointer receiver. Aliases are followed: an alias has
// its target's methods.
func (g *canonicalGen) marshals(t ast.Expr) (self, ptr bool) {
	for range 100 {
		switch x := t.(type) {
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.Ident:
			if ptr, ok := g.marshalers[x.Name]; ok {
				return true, ptr
			}
			if ts, ok := g.types[x.Name]; ok && ts.Assign != 0 {
				t = ts.Type
				continue
			}
		}
		return false, false
	}
	return false, false
}

// alias is the name t has after following aliases to a defined type
// (or to a basic one), or "" when t is not a name.
func (g *canonicalGen) alias(t ast.Expr) string {
	for range 100 {
		id, ok := t.(*ast.Ident)
		if !ok {
			return ""
		}
		ts, ok := g.types[id.Name]
		if !ok || ts.Assign == 0 {
			return id.Name
		}
		t = ts.Type
	}
	return ""
}

func (g *canonicalGen) isByte(t ast.Expr) bool {
	id, ok := g.underlying(t).(*ast.Ident)
	return ok && (id.Name == "byte" || id.Name == "uint8")
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name, goName string
	typ          ast.Expr
	omitEmpty    bool
}

// jsonFields lists a struct's encoded fields sorted by name, or reports
// that the struct needs encoding/json's own rules.
func (g *canonicalGen) jsonFields(st *ast.StructType) ([]jsonField, bool) {
	var fields []jsonField
	seen := map[string]bool{}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			return nil, false // embedded: promoted fields
		}
		tag := ""
		if f.Tag != nil {
			raw, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				return nil, false
			}
			tag = reflect.StructTag(raw).Get("json")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty":
				omit = true
			case "string", "omitzero":
				return nil, false
			}
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			jsonName := name
			if !validJSONName(jsonName) {
				jsonName = n.Name
			}
			if seen[jsonName] {
				return nil, false // encoding/json drops or picks by rules
			}
			seen[jsonName] = true
			fields = append(fields, jsonField{jsonName, n.Name, f.Type, omit})
		}
	}
	slices.SortFunc(fields, func(a, b jsonField) int { return strings.Compare(a.name, b.name) })
	return fields, true
}

// validJSONName reports whether encoding/json takes a tag's name as the
// key; it uses the Go field's name otherwise.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// holdsPtrMarshaler reports whether a value of type t may hold a value
// whose type marshals itself through a pointer receiver.
func (g *canonicalGen) holdsPtrMarshaler(t ast.Expr, seen map[string]bool) bool {
	if id, ok := t.(*ast.Ident); ok {
		if seen[id.Name] {
			return false
		}
		seen[id.Name] = true
	}
	if _, ptr := g.marshals(t); ptr {
		return true
	}
	switch u := g.underlying(t).(type) {
	case *ast.StarExpr:
		return g.holdsPtrMarshaler(u.X, seen)
	case *ast.ArrayType:
		return g.holdsPtrMarshaler(u.Elt, seen)
	case *ast.MapType:
		return g.holdsPtrMarshaler(u.Value, seen)
	case *ast.StructType:
		for _, f := range u.Fields.List {
			if g.holdsPtrMarshaler(f.Type, seen) {
				return true
			}
		}
	}
	return false
}
