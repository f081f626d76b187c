package generator

import (
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/types"
	"math"
	"strconv"
	"strings"
)

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:8])
}

// shaper spells the shape of a Go type as the fingerprint writers encode
// it: what a value's canonical form can be, independent of the names of
// the types. A pointer is its element (nil is null, whatever it points
// to); a struct is its JSON members with their options; a type of the
// package is spelled by its content, so that renaming a schema changes
// nothing, and a type that contains itself refers back up by distance.
type shaper struct {
	g     *canonicalGen
	stack []string          // the package's types being spelled, outermost first
	memo  map[string]string // shapes of the package's types that refer to no type around them
}

const noRef = math.MaxInt

// shape returns t's shape and the lowest index in s.stack it refers back
// to, noRef when none.
func (s *shaper) shape(t ast.Expr) (string, int) {
	if t == nil {
		return "any", noRef
	}
	self, _ := s.g.marshals(t)
	name := s.g.alias(t)
	ts, local := s.g.types[name]
	if !local || ts.TypeParams != nil {
		return s.spell(t, self)
	}
	for i := len(s.stack) - 1; i >= 0; i-- {
		if s.stack[i] == name {
			return "^" + strconv.Itoa(len(s.stack)-1-i), i
		}
	}
	if shape, ok := s.memo[name]; ok {
		return shape, noRef
	}
	s.stack = append(s.stack, name)
	shape, ref := s.spell(ts.Type, self)
	s.stack = s.stack[:len(s.stack)-1]
	if len(shape) > 64 {
		shape = digest(shape) // a type's shape takes the same room wherever it is used
	}
	if ref >= len(s.stack) {
		ref = noRef
		s.memo[name] = shape
	}
	return shape, ref
}

// spell spells the type expression t; self says that the type it is the
// definition of encodes itself.
func (s *shaper) spell(t ast.Expr, self bool) (string, int) {
	shape, ref := s.structure(t)
	if self {
		return "marshaler" + shape, ref
	}
	return shape, ref
}

func (s *shaper) structure(t ast.Expr) (string, int) {
	switch u := t.(type) {
	case *ast.ParenExpr:
		return s.structure(u.X)
	case *ast.Ident:
		if ts, ok := s.g.types[u.Name]; ok {
			switch {
			case ts.Assign != 0:
				return s.structure(ts.Type) // an alias is its target
			case ts.TypeParams != nil:
				return u.Name, noRef // a generic type is only used instantiated
			}
			return s.shape(u)
		}
		switch predeclared[u.Name] {
		case "String":
			return "string", noRef
		case "Bool":
			return "bool", noRef
		case "Int", "Uint":
			return "integer", noRef
		case "Float64":
			return "number", noRef
		case "Float32":
			return "float32", noRef
		}
		return "any", noRef
	case *ast.StarExpr:
		return s.shape(u.X)
	case *ast.SelectorExpr:
		if x, ok := u.X.(*ast.Ident); ok && s.g.timePkg != "" && x.Name == s.g.timePkg && u.Sel.Name == "Time" {
			return "time", noRef
		}
		return types.ExprString(u), noRef // another package's type encodes as that package says
	case *ast.ArrayType:
		if u.Len == nil && s.g.isByte(u.Elt) {
			return "bytes", noRef
		}
		elem, ref := s.shape(u.Elt)
		if u.Len != nil {
			return "[" + types.ExprString(u.Len) + "]" + elem, ref
		}
		return "[" + elem + "]", ref
	case *ast.MapType:
		key, kref := s.shape(u.Key)
		val, vref := s.shape(u.Value)
		return "map[" + key + "]" + val, min(kref, vref)
	case *ast.StructType:
		return s.fields(u)
	case *ast.InterfaceType:
		return "any", noRef
	}
	return types.ExprString(t), noRef // generic instantiations and the like
}

// fields spells a struct as its JSON members, sorted, with their options:
// name:shape, name?:shape when omitempty. A struct encoding/json treats by
// rules the writers do not follow is spelled field by field, as declared.
func (s *shaper) fields(st *ast.StructType) (string, int) {
	ref := noRef
	var b strings.Builder
	if fields, ok := s.g.jsonFields(st); ok {
		b.WriteString("{")
		for i, f := range fields {
			if i > 0 {
				b.WriteString(",")
			}
			shape, r := s.shape(f.typ)
			ref = min(ref, r)
			b.WriteString(strconv.Quote(f.name))
			if f.omitEmpty {
				b.WriteString("?")
			}
			b.WriteString(":" + shape)
		}
		b.WriteString("}")
		return b.String(), ref
	}
	b.WriteString("struct{")
	for i, f := range st.Fields.List {
		if i > 0 {
			b.WriteString(";")
		}
		for j, n := range f.Names {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(n.Name)
		}
		shape, r := s.shape(f.Type)
		ref = min(ref, r)
		b.WriteString(" " + shape)
		if f.Tag != nil {
			b.WriteString(" " + f.Tag.Value)
		}
	}
	b.WriteString("}")
	return b.String(), ref
}
