package generator

import (
	"fmt"
	"go/ast"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/idemgen/idemgen/generator/annotation"
)

// The fingerprint writers: for each annotated operation, a function that
// writes the request's canonical form (see idem.Fingerprint) into an
// idem.CanonicalWriter straight from the typed request, and one writer per
// struct type it reaches. They are derived from oapi-codegen's Go types,
// not from the schemas, because the canonical form is what encoding/json
// makes of those types: field names and omitempty come from the struct
// tags. What cannot be written field by field without re-implementing
// encoding/json (types with their own MarshalJSON or MarshalText, such as
// unions and additionalProperties, embedded structs, external types other
// than time.Time, fixed arrays and byte slices) goes through
// idem.CanonicalWriter.Value, which is Fingerprint's own path.

// fingerprintPart is one member of a fingerprinted request: a parameter
// by its name in the spec, or a body by its media-type tag.
type fingerprintPart struct {
	Name string
	Expr string // request.Params.XAccountId, request.Body, idem.Form(ctx, request.Body)
}

// fingerprintSource is what an operation's fingerprint is made of.
type fingerprintSource struct {
	Path, Query, Header []fingerprintPart
	// Body is the fingerprinted body: none, one part (Name ""), or the
	// bodies of several media types by tag.
	Body []fingerprintPart
	// Exclude are the JSON pointers into the body that do not count.
	Exclude []string
}

// canonicalGen writes the fingerprint writers of one generated package.
type canonicalGen struct {
	types    map[string]*ast.TypeSpec
	declared map[string]bool
	// marshalers are the package's types with a MarshalJSON or MarshalText
	// method, and whether one has a pointer receiver; unmarshalers those
	// with an UnmarshalJSON method.
	marshalers   map[string]bool
	unmarshalers map[string]bool
	timePkg      string            // the name oapi-codegen's file imports package time as
	request      string            // the operation's request object type
	writers      map[string]string // struct type -> its writer function
	queue        []string
	funcs        strings.Builder
	depth        int     // nested loops, for their variables' names
	shaper       *shaper // the shapes of types, for the contracts
}

func newCanonicalGen(f *ast.File) *canonicalGen {
	g := &canonicalGen{types: map[string]*ast.TypeSpec{}, declared: map[string]bool{}, marshalers: map[string]bool{}, unmarshalers: map[string]bool{}, writers: map[string]string{}}
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			g.timePkg = "time"
			if imp.Name != nil {
				g.timePkg = imp.Name.Name
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				g.declared[d.Name.Name] = true
				continue
			}
			recv := d.Recv.List[0].Type
			ptr := false
			if star, ok := recv.(*ast.StarExpr); ok {
				recv, ptr = star.X, true
			}
			id, ok := recv.(*ast.Ident)
			switch n := d.Name.Name; {
			case !ok:
			case n == "MarshalJSON" || n == "MarshalText":
				g.marshalers[id.Name] = g.marshalers[id.Name] || ptr
			case n == "UnmarshalJSON":
				g.unmarshalers[id.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					g.types[s.Name.Name] = s
					g.declared[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						g.declared[n.Name] = true
					}
				}
			}
		}
	}
	return g
}

// operation writes op's fingerprint function and returns the call of it
// that the generated handler makes.
func (g *canonicalGen) operation(op *operation, src fingerprintSource) string {
	name := g.unusedName(lowerFirst(op.GoName) + "Fingerprint")
	g.request = op.GoName + "RequestObject"
	var b strings.Builder
	fmt.Fprintf(&b, "\n// %s is the fingerprint of a request to %s:\n// its canonical form (see idem.Fingerprint), written field by field\n// from the typed request.\n", name, op.Name)
	params, args := "ctx context.Context, request "+g.request, "ctx, request"
	if op.Multipart != "" {
		params, args = params+", multipartParts []idem.MultipartPart", args+", multipartParts"
	}
	fmt.Fprintf(&b, "func %s(%s) ([]byte, error) {\n\tw := idem.NewCanonicalWriter()\n\tw.BeginObject()\n", name, params)
	// The members in canonical (sorted) order: body, header, operation,
	// path, query; an empty set of parameters is left out, as is a body
	// the operation does not have.
	if len(src.Body) > 0 {
		b.WriteString("\tw.Key(\"body\")\n")
		excl := pointers(src.Exclude)
		if len(src.Body) == 1 && src.Body[0].Name == "" {
			g.part(&b, src.Body[0], excl)
		} else {
			parts := slices.Clone(src.Body)
			slices.SortFunc(parts, func(a, b fingerprintPart) int { return strings.Compare(a.Name, b.Name) })
			b.WriteString("\tw.BeginObject()\n")
			for _, p := range parts {
				fmt.Fprintf(&b, "\tw.Key(%q)\n", p.Name)
				g.part(&b, p, under(excl, p.Name))
			}
			b.WriteString("\tw.EndObject()\n")
		}
	}
	g.params(&b, "header", src.Header)
	fmt.Fprintf(&b, "\tw.Key(\"operation\")\n\tw.String(%q)\n", op.Name)
	g.params(&b, "path", src.Path)
	g.params(&b, "query", src.Query)
	b.WriteString("\tw.EndObject()\n\treturn w.Sum()\n}\n")
	g.funcs.WriteString(b.String())
	g.flush()
	return name + "(" + args + ")"
}

// source returns the Go source of the functions written so far.
func (g *canonicalGen) source() string { return g.funcs.String() }

func (g *canonicalGen) params(b *strings.Builder, key string, params []fingerprintPart) {
	if len(params) == 0 {
		return
	}
	params = slices.Clone(params)
	slices.SortFunc(params, func(a, b fingerprintPart) int { return strings.Compare(a.Name, b.Name) })
	fmt.Fprintf(b, "\tw.Key(%q)\n\tw.BeginObject()\n", key)
	for _, p := range params {
		fmt.Fprintf(b, "\tw.Key(%q)\n", p.Name)
		// A parameter is held in an idem.Params, an interface value:
		// encoding/json could not take its address.
		g.value(b, p.Expr, g.exprType(p.Expr), false, nil)
	}
	b.WriteString("\tw.EndObject()\n")
}

// multipartBody is the expression of a multipart body: the parts
// idem.ReadMultipartRequest read.
const multipartBody = "multipartParts"

// formBody is the expression of a form body held in the request object's
// field: the form the binder bound it from, body and query (see
// idem.Form), whose fields the typed body may drop.
func formBody(field string) string { return "idem.Form(ctx, request." + field + ")" }

func isFormBody(expr string) bool { return strings.HasPrefix(expr, "idem.Form(") }

// part writes a body: the form it was bound from, the multipart parts
// read, or the typed body.
func (g *canonicalGen) part(b *strings.Builder, p fingerprintPart, excl [][]string) {
	switch {
	case isFormBody(p.Expr) && len(excl) == 0:
		fmt.Fprintf(b, "\tw.Form(%s)\n", p.Expr)
	case isFormBody(p.Expr) || p.Expr == multipartBody:
		fmt.Fprintf(b, "\tw.Value(%s%s)\n", p.Expr, pointerArgs(excl))
	default:
		g.value(b, p.Expr, g.exprType(p.Expr), false, excl)
	}
}

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
	fallback := func() {
		// Through a pointer where encoding/json would have had one, so
		// that a pointer-receiver marshaler is called as it would be.
		arg := e
		if addressable {
			arg = addr(e)
		}
		fmt.Fprintf(b, "\tw.Value(%s%s)\n", arg, pointerArgs(excl))
	}
	if t == nil {
		fallback()
		return
	}
	if self, _ := g.marshals(t); self {
		fallback()
		return
	}
	// Below an addressable value every value is addressable too, except
	// map values; a value that is not must not hold a pointer-receiver
	// marshaler, which encoding/json would skip there but a writer
	// function, taking a pointer, would not.
	if !addressable && g.holdsPtrMarshaler(t, map[string]bool{}) {
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
		i := g.loopVar("i")
		fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else {\n\tw.BeginArray()\n\tfor %s := range %s {\n", e, i, e)
		g.depth++
		g.value(b, index(e, i), u.Elt, true, nil)
		g.depth--
		b.WriteString("\t}\n\tw.EndArray()\n\t}\n")
	case *ast.MapType:
		key, ok := g.underlying(u.Key).(*ast.Ident)
		if self, _ := g.marshals(u.Key); !ok || key.Name != "string" || self || len(excl) > 0 {
			fallback()
			return
		}
		keys, k, v := g.loopVar("keys"), g.loopVar("key"), g.loopVar("val")
		fmt.Fprintf(b, "\tif %s == nil {\n\tw.Null()\n\t} else if %s, ok := idem.CanonicalKeys(%s); !ok {\n", e, keys, e)
		fmt.Fprintf(b, "\tw.Value(%s)\n\t} else {\n\tw.BeginObject()\n\tfor _, %s := range %s {\n\tw.Key(string(%s))\n\t%s := %s\n", e, k, keys, k, v, index(e, k))
		g.depth++
		g.value(b, v, u.Value, false, nil)
		g.depth--
		b.WriteString("\t}\n\tw.EndObject()\n\t}\n")
	default:
		fallback() // generic instantiations, functions, channels
	}
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

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name, goName string
	typ          ast.Expr
	omitEmpty    bool
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

// unusedName returns name, or name with a digit, so that it clashes
// with no declaration of the package.
func (g *canonicalGen) unusedName(name string) string {
	candidate := name
	for i := 2; g.declared[candidate]; i++ {
		candidate = name + strconv.Itoa(i)
	}
	g.declared[candidate] = true
	return candidate
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

// pointers splits JSON pointers into their unescaped tokens.
func pointers(exclude []string) [][]string {
	var out [][]string
	for _, p := range exclude {
		if !strings.HasPrefix(p, "/") {
			continue
		}
		tokens := strings.Split(p[1:], "/")
		for i, t := range tokens {
			tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		}
		out = append(out, tokens)
	}
	return out
}

// under returns the pointers that start at member name, without it.
func under(excl [][]string, name string) [][]string {
	var out [][]string
	for _, tokens := range excl {
		if len(tokens) > 0 && tokens[0] == name {
			out = append(out, tokens[1:])
		}
	}
	return out
}

// pointerArgs spells pointers as further arguments to Value.
func pointerArgs(excl [][]string) string {
	var b strings.Builder
	for _, tokens := range excl {
		b.WriteString(", ")
		var p strings.Builder
		for _, t := range tokens {
			p.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
		}
		b.WriteString(strconv.Quote(p.String()))
	}
	return b.String()
}

// writeFingerprints writes the fingerprint writers of the model's
// annotated operations into it, and their contracts (see contract.go).
func writeFingerprints(oapiFile *ast.File, m *model) error {
	g := newCanonicalGen(oapiFile)
	for i := range m.Operations {
		if op := &m.Operations[i]; op.Idempotent {
			op.FingerprintCall = g.operation(op, op.Fingerprint)
			m.contracts = append(m.contracts, g.contract(op))
			if err := g.checkDecodes(op); err != nil {
				return err
			}
		}
	}
	m.Fingerprints = g.source()
	m.Contract = renderContract(m.contracts)
	return nil
}

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
