package generator

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/types"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// schema); and the JSON pointers left out. A change to the spec that
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
	// Params are the path, query and header parameters, sorted by
	// location and name; Shape is "excluded" for one fingerprint.exclude
	// leaves out.
	Params []contractParam
	// Bodies are the request bodies, in the order of their media types.
	Bodies []contractBody
	// Exclude are fingerprint.exclude's JSON pointers into the body,
	// sorted.
	Exclude []string
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

const excludedShape = "excluded"

// contract records op's contract; g has just written op's fingerprint
// writer, so that its request type is current.
func (g *canonicalGen) contract(op *operation) opContract {
	c := opContract{Name: op.Name, Method: op.Method, Path: op.Path, ScopeHeader: op.ScopeHeader, ScopeFunction: op.scopeFunction}
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
	for _, p := range op.excludedParams {
		c.Params = append(c.Params, contractParam{p[0], p[1], excludedShape})
	}
	slices.SortFunc(c.Params, func(a, b contractParam) int {
		return cmp.Or(cmp.Compare(a.In, b.In), cmp.Compare(a.Name, b.Name))
	})
	for i, p := range op.Fingerprint.Body {
		b := contractBody{Tag: p.Name}
		if i < len(op.Accept) {
			b.MediaType = op.Accept[i]
		}
		switch {
		case isFormBody(p.Expr):
			b.Shape = "form"
		case p.Expr == multipartBody:
			b.Shape = "multipart"
		default:
			t := g.exprType(p.Expr)
			shape, _ := s.shape(t)
			b.Shape = digest(shape)
			b.Members = g.members(t)
		}
		c.Bodies = append(c.Bodies, b)
	}
	c.Exclude = slices.Sorted(slices.Values(op.excludePointers))
	c.Exclude = slices.Compact(c.Exclude)
	return c
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

// renderContract writes the contracts as the comment that ends the
// generated idempotency file; "" when there are none.
func renderContract(contracts []opContract) string {
	if len(contracts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + contractMarker + `
//
// How the keys of each annotated operation are scoped and what their
// fingerprints cover, as this file computes them. idemgen compares what
// it generates with this record and warns when an operation's differs: a
// request sent before a deploy of the change and retried after it would
// run again as a new request, or get a 422. See "Changing an operation's
// scope or fingerprint" in idemgen's README. A parameter is counted with
// the type its value is written as, or excluded; a body is counted as
// sent (form, multipart) or by a digest of the shape of the Go type it is
// read into, followed by its members (? when left out when empty).
//
`)
	for _, c := range contracts {
		fmt.Fprintf(&b, "// operation %s %s %s\n", tok(c.Name), tok(c.Method), tok(c.Path))
		switch {
		case c.ScopeFunction && c.ScopeHeader != "":
			fmt.Fprintf(&b, "//\tscope function header %s\n", tok(c.ScopeHeader))
		case c.ScopeFunction:
			b.WriteString("//\tscope function\n")
		case c.ScopeHeader != "":
			fmt.Fprintf(&b, "//\tscope header %s\n", tok(c.ScopeHeader))
		default:
			b.WriteString("//\tscope none\n")
		}
		for _, p := range c.Params {
			fmt.Fprintf(&b, "//\tparam %s %s %s\n", tok(p.In), tok(p.Name), tok(p.Shape))
		}
		for _, body := range c.Bodies {
			fmt.Fprintf(&b, "//\tbody %s", tok(body.MediaType))
			if body.Tag != "" {
				fmt.Fprintf(&b, " tag=%s", tok(body.Tag))
			}
			fmt.Fprintf(&b, " %s", tok(body.Shape))
			for _, m := range body.Members {
				fmt.Fprintf(&b, " %s", tok(m))
			}
			b.WriteString("\n")
		}
		for _, p := range c.Exclude {
			fmt.Fprintf(&b, "//\texclude %s\n", tok(p))
		}
	}
	return b.String()
}

// tok spells s as one token of a contract line: as it is when it has no
// spaces, quotes or other characters that would need escaping, else
// quoted.
func tok(s string) string {
	if s != "" && s[0] != '"' && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }) {
		return s
	}
	return strconv.Quote(s)
}

// tokens splits a contract line into its tokens.
func tokens(line string) ([]string, error) {
	var out []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return out, nil
		}
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			s, err := strconv.Unquote(q)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			line = line[len(q):]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		out = append(out, line[:end])
		line = line[end:]
	}
}

var errContract = errors.New("malformed contract")

// parseContract reads the contract a generated idempotency file ends
// with. It returns ok false when the file has none (written before
// contracts were, or of another version) or it cannot be read, so that
// nothing is compared with it.
func parseContract(src []byte) (contracts []opContract, ok bool) {
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n")) // as a checkout on Windows may have it
	_, rest, found := bytes.Cut(src, []byte("\n"+contractMarker+"\n"))
	if !found {
		return nil, false
	}
	var cur *opContract
	for _, line := range strings.Split(string(rest), "\n") {
		text, comment := strings.CutPrefix(strings.TrimSpace(line), "//")
		if !comment {
			if strings.TrimSpace(line) == "" {
				continue
			}
			break // the contract has ended
		}
		if cur == nil && !strings.HasPrefix(strings.TrimSpace(text), "operation ") {
			continue // the prose before the operations
		}
		toks, err := tokens(text)
		if err != nil {
			return nil, false
		}
		if len(toks) == 0 {
			continue
		}
		if toks[0] == "operation" {
			if len(toks) != 4 {
				return nil, false
			}
			contracts = append(contracts, opContract{Name: toks[1], Method: toks[2], Path: toks[3]})
			cur = &contracts[len(contracts)-1]
			continue
		}
		if err := cur.add(toks); err != nil {
			return nil, false
		}
	}
	return contracts, true
}

// add reads one line of an operation's contract into c.
func (c *opContract) add(toks []string) error {
	switch toks[0] {
	case "scope":
		args := toks[1:]
		if len(args) > 0 && args[0] == "function" {
			c.ScopeFunction, args = true, args[1:]
		}
		switch {
		case len(args) == 2 && args[0] == "header":
			c.ScopeHeader = args[1]
		case len(args) == 1 && args[0] == "none" && !c.ScopeFunction:
		case len(args) == 0 && c.ScopeFunction:
		default:
			return errContract
		}
	case "param":
		if len(toks) != 4 {
			return errContract
		}
		c.Params = append(c.Params, contractParam{toks[1], toks[2], toks[3]})
	case "body":
		args := toks[1:]
		if len(args) < 2 {
			return errContract
		}
		b := contractBody{MediaType: args[0]}
		args = args[1:]
		if tag, ok := strings.CutPrefix(args[0], "tag="); ok {
			b.Tag, args = tag, args[1:]
		}
		if len(args) == 0 {
			return errContract
		}
		b.Shape, b.Members = args[0], args[1:]
		if len(b.Members) == 0 {
			b.Members = nil
		}
		c.Bodies = append(c.Bodies, b)
	case "exclude":
		if len(toks) != 2 {
			return errContract
		}
		c.Exclude = append(c.Exclude, toks[1])
	default:
		return errContract
	}
	return nil
}

// contractWarnings compares the contracts of the model's annotated
// operations with those of src, the idempotency file name (as the config
// names it) that this generation replaces, and warns about each
// operation whose keys change: its scope, its operationId or what its
// fingerprint covers. Nothing is said when there is no old file, or it
// records no contract, or an operation is new.
func contractWarnings(src []byte, name string, m *model, contracts []opContract) []warning {
	if src == nil {
		return nil
	}
	old, ok := parseContract(src)
	if !ok {
		return nil
	}
	byName := make(map[string]*opContract, len(old))
	byRoute := make(map[string]*opContract, len(old))
	for i := range old {
		byName[old[i].Name] = &old[i]
		byRoute[old[i].Method+" "+old[i].Path] = &old[i]
	}
	newNames := make(map[string]bool, len(contracts))
	for _, c := range contracts {
		newNames[c.Name] = true
	}
	var warnings []warning
	i := 0
	for _, op := range m.Operations {
		if !op.Idempotent {
			continue
		}
		c := contracts[i]
		i++
		o := byName[c.Name]
		if o == nil {
			// Renamed: the same route, under an operationId this
			// generation does not have any more.
			if r := byRoute[c.Method+" "+c.Path]; r != nil && !newNames[r.Name] {
				o = r
			}
		}
		if o == nil {
			continue // new to idempotency: no keys in flight
		}
		if w := compareContracts(*o, c); w != "" {
			warnings = append(warnings, warning{op.pos, fmt.Sprintf("%s: warning: x-idempotent on %s %s (%s): changed from %s: %s", op.pos, op.Method, op.Path, op.Name, filepath.ToSlash(name), w)})
		}
	}
	return warnings
}

// compareContracts says how the keys of an operation whose contract was
// old change with new, and what that does to retries in flight; "" when
// they do not change.
func compareContracts(old, new opContract) string {
	var rekeyed, fingerprint []string
	// every says that the fingerprint of every request changes; else only
	// of requests that hold what changed (a body member, say).
	every := false
	if old.Name != new.Name {
		rekeyed = append(rekeyed, fmt.Sprintf("operationId %s → %s (the keys' namespace)", old.Name, new.Name))
	}
	if !strings.EqualFold(old.ScopeHeader, new.ScopeHeader) || old.ScopeFunction != new.ScopeFunction {
		rekeyed = append(rekeyed, fmt.Sprintf("scope %s → %s", scopeText(old), scopeText(new)))
	}

	// Parameters by location and name, as their canonical form keys them:
	// one counted in the fingerprint is there in every request's, as null
	// when it is not sent.
	params := map[[2]string][2]string{} // (in, name) -> old shape, new shape
	var keys [][2]string
	for i, ps := range [][]contractParam{old.Params, new.Params} {
		for _, p := range ps {
			k := [2]string{p.In, p.Name}
			v, seen := params[k]
			if !seen {
				keys = append(keys, k)
			}
			v[i] = p.Shape
			params[k] = v
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	counted := func(shape string) bool { return shape != "" && shape != excludedShape }
	for _, k := range keys {
		v := params[k]
		what := fmt.Sprintf("%s parameter %q", k[0], k[1])
		switch {
		case v[0] == v[1], !counted(v[0]) && !counted(v[1]):
			continue // unchanged, or counted in neither
		case v[0] == "":
			fingerprint = append(fingerprint, what+" added")
		case v[1] == "":
			fingerprint = append(fingerprint, what+" removed")
		case v[1] == excludedShape:
			fingerprint = append(fingerprint, what+" now left out (fingerprint.exclude)")
		case v[0] == excludedShape:
			fingerprint = append(fingerprint, what+" no longer left out (fingerprint.exclude)")
		default:
			fingerprint = append(fingerprint, fmt.Sprintf("%s type %s → %s", what, v[0], v[1]))
			continue // only requests that send it
		}
		every = true
	}

	// Bodies by media type. With several, the fingerprint holds each
	// under its tag, null but for the one sent: adding or removing one
	// changes every request's.
	mediaTypes := func(bodies []contractBody) []string {
		var out []string
		for _, b := range bodies {
			out = append(out, b.MediaType)
		}
		return out
	}
	if om, nm := mediaTypes(old.Bodies), mediaTypes(new.Bodies); !slices.Equal(om, nm) {
		fingerprint = append(fingerprint, fmt.Sprintf("request body media types %s → %s", listText(om), listText(nm)))
		every = true
	}
	for _, nb := range new.Bodies {
		i := slices.IndexFunc(old.Bodies, func(b contractBody) bool { return b.MediaType == nb.MediaType })
		if i < 0 {
			continue
		}
		ob := old.Bodies[i]
		if ob.Tag != nb.Tag && len(old.Bodies) == len(new.Bodies) {
			fingerprint = append(fingerprint, fmt.Sprintf("request body %s keyed %s → %s", nb.MediaType, or(ob.Tag, "(none)"), or(nb.Tag, "(none)")))
			every = true
		}
		if ob.Shape == nb.Shape {
			continue
		}
		// A member written whether sent or not (as null or a zero value)
		// is in every request's fingerprint; one left out when empty only
		// in those of requests that send it.
		var changes []string
		oldMembers, newMembers := memberSet(ob.Members), memberSet(nb.Members)
		for _, m := range nb.Members {
			name := strings.TrimSuffix(m, "?")
			optional, had := oldMembers[name]
			switch {
			case !had:
				changes = append(changes, fmt.Sprintf("member %q added", name))
				every = every || !newMembers[name]
			case optional && !newMembers[name]:
				changes = append(changes, fmt.Sprintf("member %q now written when empty", name))
				every = true
			case !optional && newMembers[name]:
				changes = append(changes, fmt.Sprintf("member %q now left out when empty", name))
				every = true
			}
		}
		for _, m := range ob.Members {
			if name := strings.TrimSuffix(m, "?"); !hasKey(newMembers, name) {
				changes = append(changes, fmt.Sprintf("member %q removed", name))
				every = every || !oldMembers[name]
			}
		}
		if len(changes) == 0 {
			changes = append(changes, fmt.Sprintf("the Go type it is read into changed (shape %s → %s)", ob.Shape, nb.Shape))
		}
		fingerprint = append(fingerprint, fmt.Sprintf("request body %s: %s", nb.MediaType, strings.Join(changes, ", ")))
	}
	for _, p := range new.Exclude {
		if !slices.Contains(old.Exclude, p) {
			fingerprint = append(fingerprint, fmt.Sprintf("fingerprint.exclude %s added", p))
		}
	}
	for _, p := range old.Exclude {
		if !slices.Contains(new.Exclude, p) {
			fingerprint = append(fingerprint, fmt.Sprintf("fingerprint.exclude %s removed", p))
		}
	}

	if len(rekeyed) == 0 && len(fingerprint) == 0 {
		return ""
	}
	what := rekeyed
	if len(fingerprint) > 0 {
		what = append(what, "fingerprint: "+strings.Join(fingerprint, ", "))
	}
	const retry = "a request sent with an Idempotency-Key before this is deployed and retried with the same key after it"
	oldH, newH := old.ScopeHeader, new.ScopeHeader
	var effect string
	switch {
	case old.Name != new.Name:
		effect = "Its keys change: " + retry + " runs again, as a new request"
	case !strings.EqualFold(oldH, newH) && oldH != "" && newH != "":
		// The scope is the header's value, not its name.
		effect = fmt.Sprintf("Its keys change: %s is scoped by its %s header instead of its %s header, and runs again, as a new request, unless the two hold the same value (without %s it gets 400)", retry, newH, oldH, newH)
	case !strings.EqualFold(oldH, newH) && newH != "":
		effect = fmt.Sprintf("Its keys change: %s is scoped by its %s header now, and runs again, as a new request (without %s it gets 400)", retry, newH, newH)
	case !strings.EqualFold(oldH, newH):
		effect = fmt.Sprintf("Its keys change: %s is no longer scoped by its %s header, and runs again, as a new request", retry, oldH)
	case len(rekeyed) > 0:
		// Only function: true changed, which says what the Go code does:
		// idem.Options.Scope, when set, scopes every annotated operation.
		effect = "If idem.Options.Scope is set or unset in the same deploy, the keys of every annotated operation change (it applies to all of them): " + retry + " runs again, as a new request"
	case every:
		effect = "Its fingerprint changes: " + retry + " gets 422, as a different request under the same key"
	default:
		effect = "Its fingerprint changes for requests that hold what changed: such " + retry + " gets 422, as a different request under the same key"
	}
	return strings.Join(what, "; ") + ". " + effect + "; see " + contractDoc + " for how to roll the change out"
}

// memberSet maps a body's members by name to whether each is left out
// when empty.
func memberSet(members []string) map[string]bool {
	set := make(map[string]bool, len(members))
	for _, m := range members {
		name, optional := strings.CutSuffix(m, "?")
		set[name] = optional
	}
	return set
}

func hasKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

func scopeText(c opContract) string {
	switch {
	case c.ScopeFunction && c.ScopeHeader != "":
		return "idem.Options.Scope and header " + c.ScopeHeader
	case c.ScopeFunction:
		return "idem.Options.Scope"
	case c.ScopeHeader != "":
		return "header " + c.ScopeHeader
	}
	return "none"
}

func listText(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
