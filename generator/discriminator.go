package generator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// oapi-codegen maps the values of a oneOf's (or anyOf's) discriminator to
// the Go types of its members only when each member is a $ref: it keys
// a member by its schema's name, or by the discriminator.mapping entry
// that names its $ref. Members written inline have neither, so it
// refuses the schema ("discriminator: not all schemas were mapped", or
// "ambiguous discriminator.mapping" when the spec has a mapping), as it
// does OpenAI's current spec (RealtimeTurnDetection). Where each inline
// member says its own value of the discriminator's property (a const, or
// an enum of one value, in it or in a schema of its allOf), the union is
// resolved without changing its JSON: each such member moves to
// components.schemas under a name derived from where it was and its
// value, the union refers to it by $ref, and discriminator.mapping maps
// the value to it.

// hoist is one union whose inline members moved to components.schemas.
type hoist struct {
	pointer  string // the schema that has the union
	keyword  string // "oneOf" or "anyOf"
	property string // the discriminator's
	members  []hoisted
}

// hoisted is a member of a union moved to components.schemas.
type hoisted struct {
	index       int
	name, value string
}

// unionProblem is a union with inline members oapi-codegen cannot map,
// which no hoist resolves: a member without a value of its own.
type unionProblem struct {
	pointer, keyword, why string
}

// hoistDiscriminated moves the inline members of the discriminated unions
// oapi-codegen would refuse to components.schemas, in spec, and returns
// what it did and what it could not do, in the order it found them.
// Inner unions come first, so that moving an outer union's members
// leaves the pointers of the others as they were.
func hoistDiscriminated(spec *openapi3.T) ([]hoist, []unionProblem) {
	pointers := schemaPointers(spec)
	type union struct {
		pointer, keyword string
		schema           *openapi3.Schema
	}
	var unions []union
	for s, at := range pointers {
		if s.Discriminator == nil {
			continue
		}
		for _, u := range []struct {
			keyword string
			members openapi3.SchemaRefs
		}{{"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
			if unmappable(s.Discriminator, u.members) {
				unions = append(unions, union{at, u.keyword, s})
			}
		}
	}
	slices.SortFunc(unions, func(a, b union) int {
		return cmp.Or(-cmp.Compare(strings.Count(a.pointer, "/"), strings.Count(b.pointer, "/")), cmp.Compare(a.pointer, b.pointer), cmp.Compare(a.keyword, b.keyword))
	})
	taken := componentNames(spec)
	var hoists []hoist
	var problems []unionProblem
	for _, u := range unions {
		members := u.schema.OneOf
		if u.keyword == "anyOf" {
			members = u.schema.AnyOf
		}
		h, why := planHoist(spec, u.pointer, u.keyword, u.schema.Discriminator, members, taken)
		if why != "" {
			problems = append(problems, unionProblem{u.pointer, u.keyword, why})
			continue
		}
		h.applyLoaded(spec, u.schema.Discriminator, members)
		hoists = append(hoists, h)
	}
	return hoists, problems
}

// unmappable reports whether oapi-codegen would refuse the union members
// of a schema with discriminator d for members written inline.
func unmappable(d *openapi3.Discriminator, members openapi3.SchemaRefs) bool {
	keys := map[string]bool{}
	inline, count := 0, 0
	for _, m := range members {
		if m == nil || nullOnly(m.Value) {
			continue // a nullable union's null: not a member to map
		}
		count++
		if m.Ref == "" {
			inline++
		}
		keys[codegen.RefPathToObjName(m.Ref)] = true
	}
	if inline == 0 {
		return false
	}
	// With a mapping, any inline member is refused; without one, the
	// members are keyed by their schemas' names, and inline ones have
	// none to tell them apart.
	return len(d.Mapping) > 0 || len(keys) < count
}

func nullOnly(s *openapi3.Schema) bool {
	return s != nil && s.Type != nil && s.Type.Is(openapi3.TypeNull)
}

// planHoist names each inline member of a union and finds its value of
// the discriminator's property; it returns why it cannot when a member
// has no value of its own, or shares one with another member.
func planHoist(spec *openapi3.T, pointer, keyword string, d *openapi3.Discriminator, members openapi3.SchemaRefs, taken map[string]bool) (hoist, string) {
	h := hoist{pointer: pointer, keyword: keyword, property: d.PropertyName}
	// The values taken: the mapping's, and those of the members given by
	// $ref that it does not name, which oapi-codegen keys by their
	// schemas' names.
	values := map[string]string{}
	mapped := map[string]bool{}
	for k, v := range d.Mapping {
		values[k] = v.Ref
		mapped[v.Ref] = true
	}
	for _, m := range members {
		if m != nil && m.Ref != "" && !mapped[m.Ref] {
			values[codegen.RefPathToObjName(m.Ref)] = m.Ref
		}
	}
	for i, m := range members {
		if m == nil || m.Ref != "" || nullOnly(m.Value) {
			continue
		}
		value, ok := discriminatorValue(m.Value, d.PropertyName, 0)
		if !ok {
			return hoist{}, fmt.Sprintf("its member %d, written inline, has no value of its own for the discriminator's property %s (a const, or an enum of one value)", i+1, d.PropertyName)
		}
		if _, dup := values[value]; dup {
			return hoist{}, fmt.Sprintf("its member %d, written inline, has the discriminator value %q, which another member or the mapping has too", i+1, value)
		}
		name := freeName(taken, hoistBase(spec, pointer)+goWords(value))
		values[value] = name
		h.members = append(h.members, hoisted{index: i, name: name, value: value})
	}
	return h, ""
}

// discriminatorValue returns the one value schema s allows for its
// property prop, from the property's const or one-valued enum, in s or
// in a schema of its allOf.
func discriminatorValue(s *openapi3.Schema, prop string, depth int) (string, bool) {
	if s == nil || depth > 8 {
		return "", false
	}
	if p := s.Properties[prop]; p != nil && p.Value != nil {
		if v, ok := p.Value.Const.(string); ok {
			return v, true
		}
		if len(p.Value.Enum) == 1 {
			if v, ok := p.Value.Enum[0].(string); ok {
				return v, true
			}
		}
	}
	for _, part := range s.AllOf {
		if part != nil {
			if v, ok := discriminatorValue(part.Value, prop, depth+1); ok {
				return v, true
			}
		}
	}
	return "", false
}

// hoistBase is the start of the names of the members hoisted from the
// union at pointer: the component or operation that has it, and the
// properties on the way to it.
func hoistBase(spec *openapi3.T, pointer string) string {
	toks := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	var base string
	var rest []string
	switch {
	case len(toks) >= 3 && toks[0] == "components":
		base, rest = goWords(toks[2]), toks[3:]
	case len(toks) >= 3 && toks[0] == "paths":
		base, rest = goWords(toks[2]+" "+toks[1]), toks[3:]
		if item := spec.Paths.Value(toks[1]); item != nil {
			if op := item.GetOperation(strings.ToUpper(toks[2])); op != nil && op.OperationID != "" {
				base = goWords(op.OperationID)
			}
		}
	case len(toks) >= 2 && toks[0] == "webhooks":
		base, rest = goWords(toks[1]), toks[2:]
	}
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] == "properties" {
			base += goWords(rest[i+1])
			i++
		}
	}
	return base
}

// goWords joins the words of s, each with its first letter in upper
// case: server_vad and server.vad are ServerVad.
func goWords(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// applyLoaded makes the hoist in the loaded document.
func (h hoist) applyLoaded(spec *openapi3.T, d *openapi3.Discriminator, members openapi3.SchemaRefs) {
	if spec.Components == nil {
		spec.Components = &openapi3.Components{}
	}
	if spec.Components.Schemas == nil {
		spec.Components.Schemas = openapi3.Schemas{}
	}
	if d.Mapping == nil {
		d.Mapping = map[string]openapi3.MappingRef{}
	}
	for _, m := range h.members {
		ref := "#/components/schemas/" + escapePointer(m.name)
		s := members[m.index].Value
		spec.Components.Schemas[m.name] = &openapi3.SchemaRef{Value: s}
		members[m.index] = &openapi3.SchemaRef{Ref: ref, Value: s}
		d.Mapping[m.value] = openapi3.MappingRef{Ref: ref}
	}
}

// apply makes the hoist in the spec's text, root.
func (h hoist) apply(root *yaml.Node) {
	_, union := nodeAt(root, h.pointer)
	members := get(union, h.keyword)
	if members == nil || members.Kind != yaml.SequenceNode {
		return
	}
	schemas := componentSection(root, "schemas")
	d := get(union, "discriminator")
	if d == nil || d.Kind != yaml.MappingNode {
		return
	}
	mapping := get(d, "mapping")
	if mapping == nil {
		mapping = &yaml.Node{Kind: yaml.MappingNode}
		set(d, "mapping", mapping)
	}
	for _, m := range h.members {
		if m.index >= len(members.Content) {
			continue
		}
		to := "#/components/schemas/" + escapePointer(m.name)
		set(schemas, m.name, members.Content[m.index])
		members.Content[m.index] = ref(to)
		set(mapping, m.value, str(to))
	}
}

// describe says what the hoist did, for its warning: the names of the
// first members moved, and how the others are named.
func (h hoist) describe() string {
	const listed = 6
	var moved []string
	for _, m := range h.members[:min(len(h.members), listed)] {
		moved = append(moved, fmt.Sprintf("%s is %s", m.value, m.name))
	}
	if n := len(h.members) - listed; n > 0 {
		moved = append(moved, fmt.Sprintf("and %d more, named alike", n))
	}
	what := fmt.Sprintf("%d members of this %s (discriminator %s) are written inline; moved each", len(h.members), h.keyword, h.property)
	if len(h.members) == 1 {
		what = fmt.Sprintf("a member of this %s (discriminator %s) is written inline; moved it", h.keyword, h.property)
	}
	return fmt.Sprintf("oapi-codegen maps a discriminator's values only to members given by $ref, and %s to components.schemas, "+
		"referred to by $ref and named in discriminator.mapping by its value, which changes no JSON: %s", what, strings.Join(moved, ", "))
}

// unionRefusal is the error for the unions no hoist resolves, each at its
// place in the spec, when oapi-codegen refused a discriminated union
// (err); nil when it refused something else, or no such union is left.
func (r *resolver) unionRefusal(err error, problems []unionProblem) error {
	msg := err.Error()
	if len(problems) == 0 || !(strings.Contains(msg, "discriminator: not all schemas were mapped") || strings.Contains(msg, "ambiguous discriminator.mapping")) {
		return nil
	}
	var errs []error
	for _, p := range problems {
		where := r.specPath
		if loc := r.position(p.pointer); loc != nil {
			where = fmt.Sprintf("%s:%d:%d", r.specPath, loc.Line, max(loc.Column, 1))
		}
		errs = append(errs, fmt.Errorf("%s: oapi-codegen cannot generate this %s with a discriminator: %s. "+
			"oapi-codegen maps discriminator values only to members given by $ref (a limit of oapi-codegen, not of the spec), and idemgen moves inline members to components.schemas only when each has its own value. "+
			"Move each member to components.schemas, refer to it by $ref and name its value in discriminator.mapping; or give each inline member its value as a const (or an enum of one value) of the discriminator's property",
			where, p.keyword, p.why))
	}
	return errors.Join(errs...)
}
