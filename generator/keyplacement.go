package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// keySource is a place an operation reads its key, or a part of it,
// from when that is not the Idempotency-Key header (idem.KeySource).
type keySource struct {
	In   string // header, query or body
	Name string // the parameter's name as the spec spells it, or the JSON pointer
	// Integer and UUID say what values the part holds, for the
	// conformance helpers' keys: an integer, a string of format uuid, or
	// other text.
	Integer, UUID bool
	// expr is the request object's field holding a parameter, and tokens
	// the pointer's unescaped tokens under request.Body.
	expr   string
	tokens []string
}

// Const is the idem constant of the source's location.
func (k keySource) Const() string {
	switch k.In {
	case annotation.KeyInHeader:
		return "idem.KeyInHeader"
	case annotation.KeyInQuery:
		return "idem.KeyInQuery"
	}
	return "idem.KeyInBody"
}

// kind records from its schema s whether the source holds integers or
// UUIDs, for which the conformance helpers make keys of their own kind.
func (k *keySource) kind(s *openapi3.Schema) {
	k.Integer = s.Type.Is("integer")
	k.UUID = s.Type.Is("string") && s.Format == "uuid"
}

// keyPlacement checks the annotation's key against the operation: each
// part must be a parameter it declares, or a property of its request
// body, holding a string, an integer or a UUID, and required where the
// key is, so that a request the spec calls valid always has its key.
// A key of the Idempotency-Key header alone is the default, and leaves
// op as it is.
func keyPlacement(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	parts := a.Key.Parts
	if len(parts) == 0 || len(parts) == 1 && parts[0].In == annotation.KeyInHeader && strings.EqualFold(parts[0].Name, idem.HeaderKey) {
		return nil
	}
	field := "key"
	if a.Key.Default {
		field = "x-idempotency.key"
	}
	for _, p := range parts {
		var src keySource
		var err error
		if p.In == annotation.KeyInBody {
			src, err = bodyKeySource(a, d, p)
		} else {
			src, err = paramKeySource(a, d, p)
		}
		if err != nil {
			return keyError(a, field, p, err.Error())
		}
		if p.In == annotation.KeyInHeader && strings.EqualFold(p.Name, a.Scope.Header) {
			return keyError(a, field, p, fmt.Sprintf("the %s header scopes the keys, and cannot be one too; expected another source for the key, or another scope", p.Name))
		}
		op.KeyFrom = append(op.KeyFrom, src)
	}
	var where []string
	for _, k := range op.KeyFrom {
		where = append(where, describeKeySource(k))
	}
	op.KeyDoc = "from " + strings.Join(where, " and ")
	return nil
}

// keyError is a problem with part p of the key, at p.
func keyError(a annotation.Operation, field string, p annotation.KeyPart, msg string) error {
	if a.Key.Default {
		msg += ", or a key of its own in x-idempotent" // the default may not suit every operation
	}
	return &annotation.Error{Pos: p.Pos, Msg: fmt.Sprintf("x-idempotent on %s %s: %s %s: %s", a.Method, a.Path, field, p, msg)}
}

// paramKeySource finds the header or query parameter a key part names.
func paramKeySource(a annotation.Operation, d codegen.OperationDefinition, p annotation.KeyPart) (keySource, error) {
	params := d.QueryParams
	if p.In == annotation.KeyInHeader {
		params = d.HeaderParams
	}
	var names []string
	for _, param := range params {
		if param.ParamName != p.Name && !(p.In == annotation.KeyInHeader && strings.EqualFold(param.ParamName, p.Name)) {
			names = append(names, param.ParamName)
			continue
		}
		src := keySource{In: p.In, Name: param.ParamName, expr: "request.Params." + param.GoName()}
		if param.Spec == nil || param.Spec.Schema == nil || param.Spec.Schema.Value == nil {
			return src, fmt.Errorf("the %s parameter has no schema (its content is a media type); expected a parameter with a schema of type string or integer", param.ParamName)
		}
		if why := keyTypeProblem(param.Spec.Schema.Value); why != "" {
			return src, fmt.Errorf("the %s parameter %s", param.ParamName, why)
		}
		if a.Required && !param.Required {
			return src, fmt.Errorf("the %s parameter is optional, and the key is required; expected required: true on the parameter, or required: false in x-idempotent for a key that may be left out", param.ParamName)
		}
		src.kind(param.Spec.Schema.Value)
		return src, nil
	}
	expected := "a " + p.In + " parameter declared on the operation"
	if len(names) > 0 {
		slices.Sort(names)
		expected = "one of " + strings.Join(names, ", ")
	}
	return keySource{}, fmt.Errorf("the operation declares no %s parameter %q; expected %s", p.In, p.Name, expected)
}

// bodyKeySource finds the member of the request body a key part's
// pointer names.
func bodyKeySource(a annotation.Operation, d codegen.OperationDefinition, p annotation.KeyPart) (keySource, error) {
	src := keySource{In: annotation.KeyInBody, Name: p.Name}
	if d.Spec == nil || d.Spec.RequestBody == nil || d.Spec.RequestBody.Value == nil || len(d.Bodies) == 0 {
		return src, fmt.Errorf("the operation has no request body; expected a header or query parameter")
	}
	rb := d.Spec.RequestBody.Value
	if len(d.Bodies) > 1 {
		return src, fmt.Errorf("the request body has %d media types, whose members differ; a key in the body needs one media type, JSON or a form", len(d.Bodies))
	}
	b := d.Bodies[0]
	if b.NameTag == "Multipart" || (!b.IsJSON() && !isForm(b.ContentType)) {
		return src, fmt.Errorf("the request body is %s; a key in the body needs a JSON or form-encoded body", b.ContentType)
	}
	if a.Required && !rb.Required {
		return src, fmt.Errorf("the request body is optional, and the key is required; expected required: true on the requestBody, or required: false in x-idempotent")
	}
	mt := rb.Content.Get(b.ContentType)
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return src, fmt.Errorf("the request body %s has no schema to find %s in", b.ContentType, p.Name)
	}
	s, at := mt.Schema.Value, ""
	for _, tok := range strings.Split(p.Name[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		var next *openapi3.Schema
		var required bool
		var known []string
		for _, c := range flatten(s, nil) {
			if prop, ok := c.Properties[tok]; ok && prop.Value != nil && next == nil {
				next = prop.Value
			}
			required = required || slices.Contains(c.Required, tok)
			known = append(known, sortedKeys(c.Properties)...)
		}
		if next == nil {
			slices.Sort(known)
			if len(known) == 0 {
				return src, fmt.Errorf("the request body's schema declares no properties under %q; expected a pointer to a declared property", or(at, "/"))
			}
			return src, fmt.Errorf("the request body's schema declares no %q under %q; expected one of %s", tok, or(at, "/"), strings.Join(slices.Compact(known), ", "))
		}
		at += "/" + tok
		if a.Required && !required {
			return src, fmt.Errorf("%s is not required in the request body's schema, and the key is required; expected it in the required list of its object, or required: false in x-idempotent", at)
		}
		src.tokens = append(src.tokens, tok)
		s = next
	}
	if why := keyTypeProblem(s); why != "" {
		return src, fmt.Errorf("%s in the request body %s", p.Name, why)
	}
	src.kind(s)
	return src, nil
}

// keyTypeProblem says why values of s cannot be keys, or returns "".
func keyTypeProblem(s *openapi3.Schema) string {
	switch {
	case s.Type.Is("string") && s.Format != "binary" && s.Format != "byte":
		return ""
	case s.Type.Is("integer"):
		return ""
	case s.Type == nil || len(*s.Type) == 0:
		return "has no type; expected type string or integer, which a key is written from"
	}
	return fmt.Sprintf("is of type %s%s; expected type string (a UUID included) or integer, which a key is written from", strings.Join(s.Type.Slice(), ", "), formatText(s.Format))
}

func formatText(f string) string {
	if f == "" {
		return ""
	}
	return " (format " + f + ")"
}

// describeKey documents, in the augmented spec's operation's
// description, where op reads its key from. The parameter or property
// itself is left as the spec declares it, since a schema may be shared
// with operations that do not read a key from it.
func describeKey(node *yaml.Node, op operation) {
	text := fmt.Sprintf("Idempotent: the idempotency key is read %s. A retry with the same key and request "+
		"returns the first response (with Idempotent-Replayed: true) instead of running it again; "+
		"the key with another request is a 422. Responses are kept %s.", op.KeyDoc, durationText(op.TTL))
	if op.KeyOptional {
		text += " Without the key the request runs without this protection."
	}
	if d := get(node, "description"); d != nil && d.Value != "" {
		d.Value = strings.TrimRight(d.Value, "\n") + "\n\n" + text
		d.Style = 0
	} else {
		set(node, "description", str(text))
	}
}
