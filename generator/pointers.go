package generator

import (
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// The resolutions of resolve.go change the loaded document; the augmented
// spec is written from the spec's text. JSON pointers join the two: each
// schema the resolutions change is found by the pointer of the place the
// spec writes it, which names the same node in the text. Origins would
// do for YAML only: the loader records none for a JSON spec.

// schemaPointers returns the JSON pointer of the place where doc writes
// each schema it holds: the first place a walk of the document finds it
// written out rather than referenced, components first.
func schemaPointers(doc *openapi3.T) map[*openapi3.Schema]string {
	w := pointerWalk{at: map[*openapi3.Schema]string{}}
	if c := doc.Components; c != nil {
		for _, name := range codegen.SortedSchemaKeys(c.Schemas) {
			w.schema(c.Schemas[name], "/components/schemas/"+escapePointer(name))
		}
		for _, name := range sortedKeys(c.Parameters) {
			w.parameter(c.Parameters[name], "/components/parameters/"+escapePointer(name))
		}
		for _, name := range sortedKeys(c.Headers) {
			w.header(c.Headers[name], "/components/headers/"+escapePointer(name))
		}
		for _, name := range sortedKeys(c.RequestBodies) {
			if b := c.RequestBodies[name]; b != nil && b.Ref == "" && b.Value != nil {
				w.content(b.Value.Content, "/components/requestBodies/"+escapePointer(name)+"/content")
			}
		}
		for _, name := range sortedKeys(c.Responses) {
			w.response(c.Responses[name], "/components/responses/"+escapePointer(name))
		}
		for _, name := range sortedKeys(c.Callbacks) {
			w.callback(c.Callbacks[name], "/components/callbacks/"+escapePointer(name))
		}
	}
	if doc.Paths != nil {
		for _, path := range doc.Paths.InMatchingOrder() {
			w.pathItem(doc.Paths.Value(path), "/paths/"+escapePointer(path))
		}
	}
	for _, name := range sortedKeys(doc.Webhooks) {
		w.pathItem(doc.Webhooks[name], "/webhooks/"+escapePointer(name))
	}
	return w.at
}

type pointerWalk struct {
	at map[*openapi3.Schema]string
}

func (w *pointerWalk) schema(ref *openapi3.SchemaRef, at string) {
	if ref == nil || ref.Value == nil {
		return
	}
	if ref.Ref != "" {
		// Where a local reference points, unless that place is walked
		// first: a reference into the inside of another schema.
		if !strings.HasPrefix(ref.Ref, "#/") {
			return
		}
		at = strings.TrimPrefix(ref.Ref, "#")
	}
	s := ref.Value
	if _, seen := w.at[s]; seen {
		return
	}
	w.at[s] = at
	for _, name := range codegen.SortedSchemaKeys(s.Properties) {
		w.schema(s.Properties[name], at+"/properties/"+escapePointer(name))
	}
	w.schema(s.Items, at+"/items")
	w.schema(s.AdditionalProperties.Schema, at+"/additionalProperties")
	w.schema(s.Not, at+"/not")
	for _, list := range []struct {
		kw   string
		refs openapi3.SchemaRefs
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}, {"prefixItems", s.PrefixItems}} {
		for i, r := range list.refs {
			w.schema(r, at+"/"+list.kw+"/"+strconv.Itoa(i))
		}
	}
}

func (w *pointerWalk) parameter(ref *openapi3.ParameterRef, at string) {
	if ref == nil || ref.Ref != "" || ref.Value == nil {
		return
	}
	w.schema(ref.Value.Schema, at+"/schema")
	w.content(ref.Value.Content, at+"/content")
}

func (w *pointerWalk) header(ref *openapi3.HeaderRef, at string) {
	if ref == nil || ref.Ref != "" || ref.Value == nil {
		return
	}
	w.schema(ref.Value.Schema, at+"/schema")
	w.content(ref.Value.Content, at+"/content")
}

func (w *pointerWalk) content(c openapi3.Content, at string) {
	for _, mt := range sortedKeys(c) {
		if c[mt] != nil {
			w.schema(c[mt].Schema, at+"/"+escapePointer(mt)+"/schema")
		}
	}
}

func (w *pointerWalk) response(ref *openapi3.ResponseRef, at string) {
	if ref == nil || ref.Ref != "" || ref.Value == nil {
		return
	}
	for _, name := range sortedKeys(ref.Value.Headers) {
		w.header(ref.Value.Headers[name], at+"/headers/"+escapePointer(name))
	}
	w.content(ref.Value.Content, at+"/content")
}

func (w *pointerWalk) callback(ref *openapi3.CallbackRef, at string) {
	if ref == nil || ref.Ref != "" || ref.Value == nil {
		return
	}
	for _, expr := range sortedKeys(ref.Value.Map()) {
		w.pathItem(ref.Value.Value(expr), at+"/"+escapePointer(expr))
	}
}

func (w *pointerWalk) pathItem(item *openapi3.PathItem, at string) {
	if item == nil || item.Ref != "" {
		return
	}
	for i, p := range item.Parameters {
		w.parameter(p, at+"/parameters/"+strconv.Itoa(i))
	}
	ops := item.Operations()
	for _, method := range sortedKeys(ops) {
		op, opAt := ops[method], at+"/"+strings.ToLower(method)
		for i, p := range op.Parameters {
			w.parameter(p, opAt+"/parameters/"+strconv.Itoa(i))
		}
		if b := op.RequestBody; b != nil && b.Ref == "" && b.Value != nil {
			w.content(b.Value.Content, opAt+"/requestBody/content")
		}
		if op.Responses != nil {
			responses := op.Responses.Map()
			for _, status := range sortedKeys(responses) {
				w.response(responses[status], opAt+"/responses/"+escapePointer(status))
			}
		}
		for _, name := range sortedKeys(op.Callbacks) {
			w.callback(op.Callbacks[name], opAt+"/callbacks/"+escapePointer(name))
		}
	}
}

// escapePointer escapes a key as a JSON pointer's reference token.
func escapePointer(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key // most keys; a Replacer costs more to build than the walks' work
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// nodeAt returns the node of root that pointer names, and the key node
// it is the value of (nil for an item of a sequence), or nils when
// root has none. Aliases are followed.
func nodeAt(root *yaml.Node, pointer string) (key, value *yaml.Node) {
	n := root
	if pointer == "" {
		return nil, n
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		switch {
		case n == nil:
			return nil, nil
		case n.Kind == yaml.SequenceNode:
			key = nil
			n = child(n, tok)
		case n.Kind == yaml.MappingNode:
			k, v := pair(n, tok)
			key, n = k, v
		default:
			return nil, nil
		}
	}
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil, nil
	}
	return key, n
}

// pair returns the key and value nodes of key in the mapping m.
func pair(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// setField sets key in the mapping m to v, in place of its value if it
// has one, else added at the end.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	set(m, key, v)
}
