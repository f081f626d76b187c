package generator

import (
	"fmt"
	"go/ast"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
)

// The fingerprint writers of fingerprint.include write of the body only
// the members at its pointers: what encoding/json would write of the body
// with every other member left out, in canonical order. They pick members
// through pointers, struct fields and string-keyed maps. A value that is
// written whole (a union or another type with its own JSON methods, an
// array, a free-form value) has no members to pick at generation time: a
// pointer into one is refused, with where it stops, rather than writing
// the value whole, which would count more than include says.

// unpicked is a pointer of fingerprint.include that reached a value
// written whole: the tokens up to that value and those left below it.
type unpicked struct{ at, rest []string }

// selectedPart writes the body p with only the members at the pointers
// incl, as token lists.
func (g *canonicalGen) selectedPart(b *strings.Builder, p fingerprintPart, incl [][]string) {
	if isFormBody(p.Expr) {
		g.selectedForm(b, p.Expr, incl)
		return
	}
	g.selected(b, p.Expr, g.exprType(p.Expr), false, incl, nil)
}

// selectedForm writes the form expr denotes with only the fields incl
// names, each a single token (see formKey), or null when there is none.
func (g *canonicalGen) selectedForm(b *strings.Builder, expr string, incl [][]string) {
	keys := firstTokens(incl)
	fmt.Fprintf(b, "\tif form := %s; form == nil {\n\tw.Null()\n\t} else {\n\tw.BeginObject()\n", expr)
	for _, k := range keys {
		fmt.Fprintf(b, "\tif v, ok := form[%q]; ok {\n\tw.Key(%q)\n\tw.Value(v)\n\t}\n", k, k)
	}
	b.WriteString("\tw.EndObject()\n\t}\n")
}

// selected writes expression e of type t with only the members at incl;
// addressable is as for value, and at are the tokens that led to e, for
// the report of a pointer that cannot be picked.
func (g *canonicalGen) selected(b *strings.Builder, e string, t ast.Expr, addressable bool, incl [][]string, at []string) {
	if whole(incl) {
		g.value(b, e, t, addressable, nil)
		return
	}
	switch u := g.pickable(t, addressable).(type) {
	case *ast.StarExpr:
		fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else {\n", e)
		g.selected(b, "*"+e, u.X, true, incl, at)
		b.WriteString("\t}\n")
	case *ast.StructType:
		g.selectedFields(b, addr(e), u, incl, at)
	case *ast.MapType:
		g.selectedKeys(b, e, u, incl, at)
	default:
		if g.unpicked == nil {
			g.unpicked = &unpicked{slices.Clone(at), incl[0]}
		}
		g.value(b, e, t, addressable, nil)
	}
}

// pickable is the underlying type of t when the include writer can pick
// members of a value of it: a pointer, a struct whose fields it writes
// one by one, or a map with string keys; nil when it cannot.
func (g *canonicalGen) pickable(t ast.Expr, addressable bool) ast.Expr {
	if g.encodesWhole(t, addressable) {
		return nil
	}
	switch u := g.underlying(t).(type) {
	case *ast.StarExpr:
		return u
	case *ast.StructType:
		fields, ok := g.jsonFields(u)
		if !ok {
			return nil
		}
		for _, f := range fields {
			if _, ok := g.nonEmpty("v", f.typ); f.omitEmpty && !ok {
				return nil // structFields writes it whole too
			}
		}
		return u
	case *ast.MapType:
		key, ok := g.underlying(u.Key).(*ast.Ident)
		if self, _ := g.marshals(u.Key); ok && key.Name == "string" && !self {
			return u
		}
	}
	return nil
}

// selectedFields writes the object of the struct p points to with only
// the fields incl names, as structFields writes them.
func (g *canonicalGen) selectedFields(b *strings.Builder, p string, st *ast.StructType, incl [][]string, at []string) {
	fields, _ := g.jsonFields(st)
	b.WriteString("\tw.BeginObject()\n")
	for _, f := range fields {
		sub := under(incl, f.name)
		if len(sub) == 0 {
			continue // not included
		}
		e := field(p, f.goName)
		cond := ""
		if f.omitEmpty {
			cond, _ = g.nonEmpty(e, f.typ)
		}
		if cond != "" {
			fmt.Fprintf(b, "\tif %s {\n", cond)
		}
		fmt.Fprintf(b, "\tw.Key(%q)\n", f.name)
		if star, ok := g.underlying(f.typ).(*ast.StarExpr); ok && cond != "" {
			g.selected(b, "*"+e, star.X, true, sub, append(at, f.name)) // not nil: checked above
		} else {
			g.selected(b, e, f.typ, true, sub, append(at, f.name))
		}
		if cond != "" {
			b.WriteString("\t}\n")
		}
	}
	b.WriteString("\tw.EndObject()\n")
}

// selectedKeys writes the string-keyed map e with only the keys incl
// names that it holds, or null when it is nil.
func (g *canonicalGen) selectedKeys(b *strings.Builder, e string, m *ast.MapType, incl [][]string, at []string) {
	v := g.loopVar("val")
	fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else {\n\tw.BeginObject()\n", e)
	for _, k := range firstTokens(incl) {
		fmt.Fprintf(b, "\tif %s, ok := %s; ok {\n\tw.Key(%q)\n", v, index(e, strconv.Quote(k)), k)
		g.depth++
		g.selected(b, v, m.Value, false, under(incl, k), append(at, k))
		g.depth--
		b.WriteString("\t}\n")
	}
	b.WriteString("\tw.EndObject()\n\t}\n")
}

// checkPicked refuses op's fingerprint writer when one of include's
// pointers reached a value written whole.
func (g *canonicalGen) checkPicked(op *operation) error {
	u := g.unpicked
	g.unpicked = nil
	if u == nil {
		return nil
	}
	want := append(slices.Clone(u.at), u.rest...)
	pos, written := op.pos, pointerText(want)
	for _, p := range op.includeBody {
		if slices.Equal(pointers([]string{p.Value})[0], want) {
			pos, written = p.Pos, p.Value
			break
		}
	}
	at := u.at
	if len(at) == 0 {
		return &annotation.Error{Pos: pos, Msg: fmt.Sprintf("x-idempotent on %s %s: fingerprint.include %s: the request body's Go type is written whole, as encoding/json encodes it (a union, or a type with its own JSON methods), so a pointer cannot pick members of it; expected fingerprint.exclude, or only parameter names in include", op.Method, op.Path, written)}
	}
	return &annotation.Error{Pos: pos, Msg: fmt.Sprintf("x-idempotent on %s %s: fingerprint.include %s: %s is written whole, as encoding/json encodes it (a union, a type with its own JSON methods, an array or a free-form value), so a pointer cannot pick members inside it; expected %s", op.Method, op.Path, written, pointerText(at), pointerText(at))}
}

// whole reports whether the pointers incl include the value they are
// relative to whole: one of them ends there.
func whole(incl [][]string) bool {
	return slices.ContainsFunc(incl, func(tokens []string) bool { return len(tokens) == 0 })
}

// firstTokens are the members the pointers incl start with, sorted as
// canonical keys are, each once.
func firstTokens(incl [][]string) []string {
	var keys []string
	for _, tokens := range incl {
		if len(tokens) > 0 {
			keys = append(keys, tokens[0])
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// pointerText spells tokens as a JSON pointer.
func pointerText(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// selection spells the shape of what the include writer writes of a
// value of type t with the pointers incl, as selected walks it: the
// shape of a value written whole, else the members picked.
func (s *shaper) selection(t ast.Expr, addressable bool, incl [][]string) string {
	if whole(incl) {
		shape, _ := s.shape(t)
		return shape
	}
	var b strings.Builder
	switch u := s.g.pickable(t, addressable).(type) {
	case *ast.StarExpr:
		return s.selection(u.X, true, incl)
	case *ast.StructType:
		fields, _ := s.g.jsonFields(u)
		b.WriteString("{")
		for _, f := range fields {
			if sub := under(incl, f.name); len(sub) > 0 {
				if b.Len() > 1 {
					b.WriteString(",")
				}
				b.WriteString(strconv.Quote(f.name))
				if f.omitEmpty {
					b.WriteString("?")
				}
				b.WriteString(":" + s.selection(f.typ, true, sub))
			}
		}
		b.WriteString("}")
	case *ast.MapType:
		b.WriteString("map{")
		for i, k := range firstTokens(incl) {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.Quote(k) + ":" + s.selection(u.Value, false, under(incl, k)))
		}
		b.WriteString("}")
	default:
		shape, _ := s.shape(t) // refused by checkPicked
		return shape
	}
	return b.String()
}

// selectedMembers are the members, as contractBody records them, that
// the pointers incl start with.
func selectedMembers(members []string, incl [][]string) []string {
	var out []string
	for _, m := range members {
		if slices.Contains(firstTokens(incl), strings.TrimSuffix(m, "?")) {
			out = append(out, m)
		}
	}
	return out
}
