package generator

import (
	"fmt"
	"go/ast"
	"slices"
	"strconv"
	"strings"
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
	// Selected is set by fingerprint.include: only the listed parameters
	// are in Path, Query and Header, and of the body only the members at
	// the Include pointers count (none when there is none).
	Selected bool
	Include  []string
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
	// unpicked is the first pointer of fingerprint.include the writer
	// could not pick, for checkPicked; nil when there is none.
	unpicked *unpicked
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

// operation writes op's fingerprint function and returns its name. The
// generated handler calls it with ctx and the request, and the multipart
// parts where the operation has a multipart body.
func (g *canonicalGen) operation(op *operation, src fingerprintSource) string {
	name := g.unusedName(lowerFirst(op.GoName) + "Fingerprint")
	g.request = op.GoName + "RequestObject"
	var b strings.Builder
	fmt.Fprintf(&b, "\n// %s is the fingerprint of a request to %s:\n// its canonical form (see idem.Fingerprint), written field by field\n// from the typed request.\n", name, op.Name)
	params := "ctx context.Context, request " + g.request
	if op.Multipart != "" {
		params += ", multipartParts []idem.MultipartPart"
	}
	fmt.Fprintf(&b, "func %s(%s) ([]byte, error) {\n\tw := idem.NewCanonicalWriter()\n\tw.BeginObject()\n", name, params)
	// The members in canonical (sorted) order: body, header, operation,
	// path, query; an empty set of parameters is left out, as is a body
	// the operation does not have.
	if len(src.Body) > 0 && (!src.Selected || len(src.Include) > 0) {
		b.WriteString("\tw.Key(\"body\")\n")
		g.body(&b, src)
	}
	g.params(&b, "header", src.Header)
	fmt.Fprintf(&b, "\tw.Key(\"operation\")\n\tw.String(%q)\n", op.Name)
	g.params(&b, "path", src.Path)
	g.params(&b, "query", src.Query)
	b.WriteString("\tw.EndObject()\n\treturn w.Sum()\n}\n")
	g.funcs.WriteString(b.String())
	g.flush()
	return name
}

// body writes the request's body: one part (Name ""), or an object of
// the bodies of several media types by tag. With fingerprint.include only
// the members at its pointers are written, else all but exclude's.
func (g *canonicalGen) body(b *strings.Builder, src fingerprintSource) {
	ptrs, write := pointers(src.Exclude), g.part
	if src.Selected {
		ptrs, write = pointers(src.Include), g.selectedPart
	}
	if len(src.Body) == 1 && src.Body[0].Name == "" {
		write(b, src.Body[0], ptrs)
		return
	}
	parts := slices.Clone(src.Body)
	slices.SortFunc(parts, func(a, b fingerprintPart) int { return strings.Compare(a.Name, b.Name) })
	b.WriteString("\tw.BeginObject()\n")
	for _, p := range parts {
		fmt.Fprintf(b, "\tw.Key(%q)\n", p.Name)
		write(b, p, under(ptrs, p.Name))
	}
	b.WriteString("\tw.EndObject()\n")
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

// writeFingerprints writes the fingerprint writers of the model's
// annotated operations into it, and their contracts (see contract.go).
func writeFingerprints(oapiFile *ast.File, m *model) error {
	g := newCanonicalGen(oapiFile)
	for i := range m.Operations {
		if op := &m.Operations[i]; op.Idempotent {
			op.FingerprintWriter = g.operation(op, op.Fingerprint)
			if len(op.KeyFrom) > 0 {
				reader, err := g.keyReader(op)
				if err != nil {
					return err
				}
				op.KeyReader = reader
			}
			if err := g.checkPicked(op); err != nil {
				return err
			}
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
