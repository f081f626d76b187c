package generator

import (
	"cmp"
	"go/ast"
	"slices"
)

// An operation's contract is what its stored keys depend on: the scope
// its keys are claimed in and what its fingerprint covers. The generated
// idempotency file ends with the contract of every annotated operation,
// written one fact a line, so that a change shows in review, and so that
// the next generation can tell the change apart from a reformatting:
// Generate reads the contract of the file it replaces and warns about
// every operation whose keys a deploy of the new one would change.
//
// The fingerprint is recorded as what the fingerprint writers encode, not
// as the spec says it: the parameters counted, by location and name as
// their canonical form keys them, with the shape of their Go types; each
// request body, by media type, with the shape of the Go type it is
// written from (a form or multipart body counts as sent, whatever its
// schema); and the JSON pointers left out, or the entries of
// fingerprint.include, the only ones that count. With include, a body is
// recorded by the shape of what the writers pick of it, so that a change
// to a member it does not list says nothing. A change to the spec that
// leaves those alone, such as a description, an example or the order of
// properties, leaves the contract alone too.

// contractMarker starts the contract in the generated file; the version
// changes when the format does, and a contract of another version is not
// compared.
const contractMarker = "// idemgen:contract v1"

// contractDoc is the README section on rolling such a change out.
const contractDoc = `"Changing an operation's scope or fingerprint" in idemgen's README (https://github.com/idemgen/idemgen#changing-an-operations-scope-or-fingerprint)`

// opContract is one annotated operation's contract.
type opContract struct {
	Name, Method, Path string
	// ScopeHeader is the header that scopes keys, "" for none, and
	// ScopeFunction whether the spec says idem.Options.Scope does.
	ScopeHeader   string
	ScopeFunction bool
	// Key are where the key is read from, "in name" each, in order; none
	// for the Idempotency-Key header.
	Key []string
	// Params are the path, query and header parameters, sorted by
	// location and name; Shape is "excluded" for one fingerprint.exclude
	// leaves out, "not-included" for one fingerprint.include does not list.
	Params []contractParam
	// Bodies are the request bodies, in the order of their media types.
	Bodies []contractBody
	// Exclude are fingerprint.exclude's JSON pointers into the body,
	// sorted.
	Exclude []string
	// Include are fingerprint.include's entries, JSON pointers and
	// parameter names as written, sorted; nil without include.
	Include []string
}

type contractParam struct{ In, Name, Shape string }

type contractBody struct {
	MediaType string
	// Tag keys the body in the fingerprint when the operation has
	// several media types; "" when it has one.
	Tag string
	// Shape is "form" or "multipart" for bodies fingerprinted as sent,
	// else the digest of the shape of the body's Go type.
	Shape string
	// Members are the body's top-level JSON members, when it is an
	// object, for telling what changed: each name, followed by ? when
	// it is left out when empty (omitempty) rather than written as null
	// or a zero value.
	Members []string
}

const (
	excludedShape    = "excluded"
	notIncludedShape = "not-included"
)

// contract records op's contract; g has just written op's fingerprint
// writer, so that its request type is current.
func (g *canonicalGen) contract(op *operation) opContract {
	c := opContract{Name: op.Name, Method: op.Method, Path: op.Path, ScopeHeader: op.ScopeHeader, ScopeFunction: op.scopeFunction}
	for _, k := range op.KeyFrom {
		c.Key = append(c.Key, k.In+" "+k.Name)
	}
	if g.shaper == nil {
		g.shaper = &shaper{g: g, memo: map[string]string{}}
	}
	s := g.shaper
	for _, set := range []struct {
		in    string
		parts []fingerprintPart
	}{{"path", op.Fingerprint.Path}, {"query", op.Fingerprint.Query}, {"header", op.Fingerprint.Header}} {
		for _, p := range set.parts {
			shape, _ := s.shape(g.exprType(p.Expr))
			if len(shape) > 48 {
				shape = digest(shape)
			}
			c.Params = append(c.Params, contractParam{set.in, p.Name, shape})
		}
	}
	left := excludedShape
	if op.Fingerprint.Selected {
		left = notIncludedShape
	}
	for _, p := range op.excludedParams {
		c.Params = append(c.Params, contractParam{p[0], p[1], left})
	}
	slices.SortFunc(c.Params, func(a, b contractParam) int {
		return cmp.Or(cmp.Compare(a.In, b.In), cmp.Compare(a.Name, b.Name))
	})
	c.Bodies = g.contractBodies(op)
	c.Exclude = slices.Sorted(slices.Values(op.excludePointers))
	c.Exclude = slices.Compact(c.Exclude)
	if len(op.include) > 0 {
		c.Include = slices.Compact(slices.Sorted(slices.Values(op.include)))
	}
	return c
}

// contractBodies records op's request bodies as its fingerprint writer
// writes them: none when fingerprint.include names no body member.
func (g *canonicalGen) contractBodies(op *operation) []contractBody {
	src := op.Fingerprint
	if src.Selected && len(src.Include) == 0 {
		return nil
	}
	incl := pointers(src.Include)
	var bodies []contractBody
	for i, p := range src.Body {
		b := contractBody{Tag: p.Name}
		if i < len(op.Accept) {
			b.MediaType = op.Accept[i]
		}
		switch t := g.exprType(p.Expr); {
		case isFormBody(p.Expr):
			b.Shape = "form"
		case p.Expr == multipartBody:
			b.Shape = "multipart"
		case src.Selected:
			sub := incl
			if p.Name != "" {
				sub = under(incl, p.Name)
			}
			b.Shape = digest(g.shaper.selection(t, false, sub))
			b.Members = selectedMembers(g.members(t), sub)
		default:
			shape, _ := g.shaper.shape(t)
			b.Shape = digest(shape)
			b.Members = g.members(t)
		}
		bodies = append(bodies, b)
	}
	return bodies
}

// members are the JSON members of a struct type t, or of the struct it
// points to, sorted; nil for any other type.
func (g *canonicalGen) members(t ast.Expr) []string {
	if t == nil {
		return nil
	}
	if star, ok := g.underlying(t).(*ast.StarExpr); ok {
		t = star.X
	}
	if self, _ := g.marshals(t); self {
		return nil
	}
	st, ok := g.underlying(t).(*ast.StructType)
	if !ok {
		return nil
	}
	fields, ok := g.jsonFields(st)
	if !ok {
		return nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
		if f.omitEmpty {
			names[i] += "?"
		}
	}
	return names
}
