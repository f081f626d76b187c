package generator

import (
	"fmt"
	"go/ast"
	"slices"
	"strconv"
	"strings"
)

// predeclared are the basic types, by how the writer writes them.
var predeclared = map[string]string{
	"string": "String", "bool": "Bool",
	"int": "Int", "int8": "Int", "int16": "Int", "int32": "Int", "int64": "Int", "rune": "Int",
	"uint": "Uint", "uint8": "Uint", "uint16": "Uint", "uint32": "Uint", "uint64": "Uint", "byte": "Uint", "uintptr": "Uint",
	"float32": "Float32", "float64": "Float64",
}

// conversion is the basic type a writer method takes.
var conversion = map[string]string{"String": "string", "Bool": "bool", "Int": "int64", "Uint": "uint64", "Float32": "float32", "Float64": "float64"}

// value writes the statements that write expression e of type t.
// addressable says whether encoding/json would reach e through a pointer
// (it calls pointer-receiver marshalers only then); excl are the JSON
// pointers under e to leave out, as token lists.
func (g *canonicalGen) value(b *strings.Builder, e string, t ast.Expr, addressable bool, excl [][]string) {
	fallback := func() { g.wholeValue(b, e, addressable, excl) }
	if g.encodesWhole(t, addressable) {
		fallback()
		return
	}
	named := g.alias(t)
	switch u := g.underlying(t).(type) {
	case *ast.Ident:
		method, ok := predeclared[u.Name]
		if !ok {
			fallback() // any, error, complex numbers
			return
		}
		arg := e
		if named != conversion[method] {
			arg = conversion[method] + "(" + e + ")"
		}
		fmt.Fprintf(b, "\tw.%s(%s)\n", method, arg)
	case *ast.InterfaceType:
		fallback()
	case *ast.StarExpr:
		fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else {\n", e)
		g.value(b, "*"+e, u.X, true, excl)
		b.WriteString("\t}\n")
	case *ast.SelectorExpr:
		// time.Time itself, not a type defined over it, which has none
		// of its methods.
		if x, ok := u.X.(*ast.Ident); ok && named == "" && g.timePkg != "" && x.Name == g.timePkg && u.Sel.Name == "Time" && len(excl) == 0 {
			fmt.Fprintf(b, "\tw.Time(%s)\n", e)
			return
		}
		fallback()
	case *ast.StructType:
		if len(excl) > 0 || named == "" || g.types[named].Assign != 0 {
			// Leaving members out, or an anonymous struct: written in place.
			g.structFields(b, addr(e), u, excl)
			return
		}
		fmt.Fprintf(b, "\t%s(w, %s)\n", g.writer(named), addr(e))
	case *ast.ArrayType:
		if u.Len != nil || len(excl) > 0 || g.isByte(u.Elt) {
			fallback() // fixed arrays, []byte as base64, pointers into arrays
			return
		}
		g.sliceElems(b, e, u.Elt)
	case *ast.MapType:
		key, ok := g.underlying(u.Key).(*ast.Ident)
		if self, _ := g.marshals(u.Key); !ok || key.Name != "string" || self || len(excl) > 0 {
			fallback()
			return
		}
		g.mapValues(b, e, u.Value)
	default:
		fallback() // generic instantiations, functions, channels
	}
}

// encodesWhole reports whether a value of type t goes through Value
// whole, as encoding/json encodes it: a type unknown here, or one that
// encodes itself, or one holding a pointer-receiver marshaler where
// encoding/json would not call it.
func (g *canonicalGen) encodesWhole(t ast.Expr, addressable bool) bool {
	if t == nil {
		return true
	}
	if self, _ := g.marshals(t); self {
		return true
	}
	// Below an addressable value every value is addressable too, except
	// map values; a value that is not must not hold a pointer-receiver
	// marshaler, which encoding/json would skip there but a writer
	// function, taking a pointer, would not.
	return !addressable && g.holdsPtrMarshaler(t, map[string]bool{})
}

// wholeValue writes e through Value, leaving out the pointers excl.
func (g *canonicalGen) wholeValue(b *strings.Builder, e string, addressable bool, excl [][]string) {
	// Through a pointer where encoding/json would have had one, so
	// that a pointer-receiver marshaler is called as it would be.
	arg := e
	if addressable {
		arg = addr(e)
	}
	fmt.Fprintf(b, "\tw.Value(%s%s)\n", arg, pointerArgs(excl))
}

// sliceElems writes the slice e of elements of type elem as an array,
// or null when it is nil.
func (g *canonicalGen) sliceElems(b *strings.Builder, e string, elem ast.Expr) {
	i := g.loopVar("i")
	fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else {\n\tw.BeginArray()\n\tfor %s := range %s {\n", e, i, e)
	g.depth++
	g.value(b, index(e, i), elem, true, nil)
	g.depth--
	b.WriteString("\t}\n\tw.EndArray()\n\t}\n")
}

// mapValues writes the string-keyed map e of values of type val as an
// object in the order of its keys, or null when it is nil; a map whose
// keys idem.CanonicalKeys cannot order goes through Value.
func (g *canonicalGen) mapValues(b *strings.Builder, e string, val ast.Expr) {
	keys, k, v := g.loopVar("keys"), g.loopVar("key"), g.loopVar("val")
	fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else if %s, ok := idem.CanonicalKeys(%s); !ok {\n", e, keys, e)
	fmt.Fprintf(b, "\tw.Value(%s)\n\t} else {\n\tw.BeginObject()\n\tfor _, %s := range %s {\n\tw.Key(string(%s))\n\t%s := %s\n", e, k, keys, k, v, index(e, k))
	g.depth++
	g.value(b, v, val, false, nil)
	g.depth--
	b.WriteString("\t}\n\tw.EndObject()\n\t}\n")
}

// loopVar names a loop's variable by its nesting.
func (g *canonicalGen) loopVar(base string) string {
	if g.depth == 0 {
		return base
	}
	return base + strconv.Itoa(g.depth+1)
}

// writer returns the name of the writer function of a struct type,
// queuing it to be written.
func (g *canonicalGen) writer(typ string) string {
	if name, ok := g.writers[typ]; ok {
		return name
	}
	name := g.unusedName("canonical" + typ)
	g.writers[typ] = name
	g.queue = append(g.queue, typ)
	return name
}

// flush writes the queued struct writers, and those they queue.
func (g *canonicalGen) flush() {
	for len(g.queue) > 0 {
		typ := g.queue[0]
		g.queue = g.queue[1:]
		var b strings.Builder
		fmt.Fprintf(&b, "\n// %s writes *v in canonical form.\nfunc %s(w *idem.CanonicalWriter, v *%s) {\n", g.writers[typ], g.writers[typ], typ)
		depth := g.depth
		g.depth = 0
		g.structFields(&b, "v", g.underlying(ast.NewIdent(typ)).(*ast.StructType), nil)
		g.depth = depth
		b.WriteString("}\n")
		g.funcs.WriteString(b.String())
	}
}

// structFields writes the object of the struct p points to, its fields
// in canonical order. A struct that encoding/json treats in ways the
// writer does not follow (embedded fields, the string and omitzero
// options, clashing names) goes through Value whole.
func (g *canonicalGen) structFields(b *strings.Builder, p string, st *ast.StructType, excl [][]string) {
	fields, ok := g.jsonFields(st)
	if !ok {
		fmt.Fprintf(b, "\tw.Value(%s%s)\n", p, pointerArgs(excl))
		return
	}
	conds := make([]string, len(fields))
	for i, f := range fields {
		if !f.omitEmpty {
			continue
		}
		if conds[i], ok = g.nonEmpty(field(p, f.goName), f.typ); !ok {
			fmt.Fprintf(b, "\tw.Value(%s%s)\n", p, pointerArgs(excl))
			return
		}
	}
	b.WriteString("\tw.BeginObject()\n")
	for i, f := range fields {
		sub := under(excl, f.name)
		if slices.ContainsFunc(sub, func(tokens []string) bool { return len(tokens) == 0 }) {
			continue // excluded whole
		}
		e := field(p, f.goName)
		cond := conds[i]
		if cond != "" {
			fmt.Fprintf(b, "\tif %s {\n", cond)
		}
		fmt.Fprintf(b, "\tw.Key(%q)\n", f.name)
		if star, ok := g.underlying(f.typ).(*ast.StarExpr); ok && cond != "" {
			g.value(b, "*"+e, star.X, true, sub) // not nil: checked above
		} else {
			g.value(b, e, f.typ, true, sub)
		}
		if cond != "" {
			b.WriteString("\t}\n")
		}
	}
	b.WriteString("\tw.EndObject()\n")
}

// nonEmpty is the condition under which an omitempty field of type t is
// written: encoding/json leaves out false, 0, "", nil and empty
// collections, and never leaves out a struct.
func (g *canonicalGen) nonEmpty(e string, t ast.Expr) (string, bool) {
	switch u := g.underlying(t).(type) {
	case *ast.Ident:
		switch predeclared[u.Name] {
		case "String":
			return "len(" + e + ") != 0", true
		case "Bool":
			return e, true
		case "Int", "Uint", "Float32", "Float64":
			return e + " != 0", true
		}
		if u.Name == "any" {
			return e + " != nil", true
		}
	case *ast.StarExpr, *ast.InterfaceType:
		return e + " != nil", true
	case *ast.MapType:
		return "len(" + e + ") != 0", true
	case *ast.ArrayType:
		if u.Len == nil {
			return "len(" + e + ") != 0", true
		}
	case *ast.StructType:
		return "", true
	case *ast.SelectorExpr:
		if x, ok := u.X.(*ast.Ident); ok && x.Name == g.timePkg && u.Sel.Name == "Time" {
			return "", true
		}
	}
	return "", false // a type whose kind is not known here
}

// addr is the address of the value e denotes.
func addr(e string) string {
	if p, ok := strings.CutPrefix(e, "*"); ok {
		return p
	}
	return "&" + e
}

// field selects a field of the struct p points to.
func field(p, name string) string {
	return strings.TrimPrefix(p, "&") + "." + name
}

// index indexes the slice or map e denotes.
func index(e, i string) string {
	if strings.HasPrefix(e, "*") {
		e = "(" + e + ")"
	}
	return e + "[" + i + "]"
}
