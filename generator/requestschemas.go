package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// requestDoc is the document the layer checks requests against (package
// idemvalidate): each validated operation's parameters and request body,
// and under components the schemas they refer to. It holds nothing a
// check does not read (descriptions, examples, responses), and its
// references all point into itself, wherever the spec's pointed.
type requestDoc struct {
	specPath string
	schemas  openapi3.Schemas            // components, by the names chosen
	named    map[*openapi3.Schema]string // a component's schema -> its name
	byRef    map[string]string           // a reference as the spec wrote it -> the name
	warnings []string
}

// requestSchemas returns the document for the operations that validate,
// as indented JSON; nil when none does. version is the spec's openapi
// version, which decides the schema dialect.
func requestSchemas(specPath, version string, ops []operation) ([]byte, []string, error) {
	d := &requestDoc{specPath: specPath, schemas: openapi3.Schemas{}, named: map[*openapi3.Schema]string{}, byRef: map[string]string{}}
	paths := openapi3.NewPaths()
	for _, op := range ops {
		if !op.Idempotent || !op.Validate {
			continue
		}
		item := paths.Value(op.Path)
		if item == nil {
			item = &openapi3.PathItem{}
			paths.Set(op.Path, item)
		}
		item.SetOperation(op.Method, d.operation(op))
	}
	if paths.Len() == 0 {
		return nil, nil, nil
	}
	doc := &openapi3.T{
		OpenAPI:    version,
		Info:       &openapi3.Info{Title: "request schemas", Version: "1"},
		Paths:      paths,
		Components: &openapi3.Components{Schemas: d.schemas},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: request schemas: %w", specPath, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, nil, err
	}
	return out.Bytes(), d.warnings, nil
}

// operation copies what op's checks read: its parameters, except the
// Idempotency-Key the protocol checks itself, and its request body.
func (d *requestDoc) operation(op operation) *openapi3.Operation {
	out := &openapi3.Operation{OperationID: op.Name, Responses: openapi3.NewResponses()}
	for _, p := range op.def.AllParams() {
		if p.Spec == nil || (p.In == openapi3.ParameterInHeader && strings.EqualFold(p.ParamName, "Idempotency-Key")) {
			continue
		}
		c := *p.Spec
		c.Extensions, c.Origin, c.Description, c.Example, c.Examples = nil, nil, "", nil, nil
		c.Schema = d.ref(c.Schema)
		c.Content = d.content(c.Content)
		out.Parameters = append(out.Parameters, &openapi3.ParameterRef{Value: &c})
	}
	if op.def.Spec != nil && op.def.Spec.RequestBody != nil && op.def.Spec.RequestBody.Value != nil {
		body := op.def.Spec.RequestBody.Value
		out.RequestBody = &openapi3.RequestBodyRef{Value: &openapi3.RequestBody{Required: body.Required, Content: d.content(body.Content)}}
	}
	return out
}

func (d *requestDoc) content(in openapi3.Content) openapi3.Content {
	if in == nil {
		return nil
	}
	out := make(openapi3.Content, len(in))
	for name, mt := range in {
		c := &openapi3.MediaType{}
		if !decodedByKind(name) || formDecodable(mt) {
			c.Schema = d.ref(mt.Schema)
		}
		for field, enc := range mt.Encoding {
			if c.Encoding == nil {
				c.Encoding = map[string]*openapi3.Encoding{}
			}
			c.Encoding[field] = &openapi3.Encoding{ContentType: enc.ContentType, Style: enc.Style, Explode: enc.Explode, AllowReserved: enc.AllowReserved}
		}
		out[name] = c
	}
	return out
}

// ref copies a schema reference: a reference becomes one to the
// component it names here, an inline schema is copied.
func (d *requestDoc) ref(r *openapi3.SchemaRef) *openapi3.SchemaRef {
	switch {
	case r == nil || r.Value == nil:
		return nil
	case r.Ref != "":
		return &openapi3.SchemaRef{Ref: "#/components/schemas/" + d.component(r)}
	}
	return &openapi3.SchemaRef{Value: d.schema(r.Value)}
}

// component names the schema r refers to and copies it once, under the
// last segment of its reference, numbered where two schemas meet.
func (d *requestDoc) component(r *openapi3.SchemaRef) string {
	if name, ok := d.named[r.Value]; ok {
		d.byRef[r.Ref] = name
		return name
	}
	base := r.Ref[strings.LastIndex(r.Ref, "/")+1:]
	base = strings.NewReplacer("~1", "/", "~0", "~").Replace(base)
	name := base
	for i := 2; d.schemas[name] != nil; i++ {
		name = base + strconv.Itoa(i)
	}
	d.named[r.Value], d.byRef[r.Ref] = name, name
	d.schemas[name] = &openapi3.SchemaRef{} // taken, before a cycle comes back to it
	d.schemas[name].Value = d.schema(r.Value)
	return name
}

// Fields of a schema that no check reads.
var undocumented = map[string]bool{"Extensions": true, "Origin": true, "Title": true, "Description": true, "Example": true, "Examples": true, "ExternalDocs": true, "Deprecated": true, "XML": true}

// schema copies s without what no check reads, its subschemas copied by
// ref. It walks the fields by type, so that a subschema kin-openapi adds
// (a JSON Schema keyword) is copied too.
func (d *requestDoc) schema(s *openapi3.Schema) *openapi3.Schema {
	c := *s
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if undocumented[v.Type().Field(i).Name] {
			f.SetZero()
			continue
		}
		switch p := f.Addr().Interface().(type) {
		case **openapi3.SchemaRef:
			*p = d.ref(*p)
		case *openapi3.SchemaRefs:
			refs := make(openapi3.SchemaRefs, len(*p))
			for j, r := range *p {
				refs[j] = d.ref(r)
			}
			if *p != nil {
				*p = refs
			}
		case *openapi3.Schemas:
			if *p != nil {
				m := make(openapi3.Schemas, len(*p))
				for k, r := range *p {
					m[k] = d.ref(r)
				}
				*p = m
			}
		}
	}
	c.AdditionalProperties.Schema = d.ref(s.AdditionalProperties.Schema)
	if s.Discriminator != nil {
		disc := &openapi3.Discriminator{PropertyName: s.Discriminator.PropertyName}
		for value, m := range s.Discriminator.Mapping {
			if disc.Mapping == nil {
				disc.Mapping = map[string]openapi3.MappingRef{}
			}
			name, ok := d.byRef[m.Ref]
			if !ok && m.Value != nil {
				name, ok = d.component(&openapi3.SchemaRef{Ref: m.Ref, Value: m.Value}), true
			}
			if ok { // a mapping the loader left unresolved is left out, to the oneOf's own matching
				disc.Mapping[value] = openapi3.MappingRef{Ref: "#/components/schemas/" + name}
			}
		}
		c.Discriminator = disc
	}
	if c.Pattern != "" {
		if _, err := regexp.Compile(c.Pattern); err != nil {
			d.warnings = append(d.warnings, fmt.Sprintf("%s: the pattern %q is not in the syntax of Go's regexp (RE2), so requests are not checked against it: %v", d.specPath, c.Pattern, err))
			c.Pattern = ""
		}
	}
	return &c
}

// goString is the Go literal of text: a raw string, which reads as the
// JSON it holds, unless the text has a backquote; "" for none.
func goString(text []byte) string {
	switch {
	case text == nil:
		return ""
	case bytes.ContainsAny(text, "`\r"):
		return strconv.Quote(string(text))
	}
	return "`" + string(text) + "`"
}

// decodedByKind reports whether a media type is a form's, which
// kin-openapi decodes into an object by its schema before checking it.
func decodedByKind(mediaType string) bool {
	mt, _, err := mime.ParseMediaType(mediaType)
	return err == nil && (mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data")
}

// formDecodable reports whether kin-openapi's form decoders take the
// shape of mt's schema: an object whose members are scalars, arrays of
// scalars, or objects of scalars encoded apart (deepObject, or form
// without explode). A form of another shape (a union, an array of
// objects, as Stripe's forms have) is left unchecked, to the binder:
// kin-openapi would refuse every request to it as unsupported.
func formDecodable(mt *openapi3.MediaType) bool {
	if mt.Schema == nil || mt.Schema.Value == nil {
		return false
	}
	s := mt.Schema.Value
	if !s.Type.Is("object") || len(s.OneOf)+len(s.AnyOf)+len(s.AllOf) > 0 {
		return false
	}
	for name, p := range s.Properties {
		if p.Value == nil {
			return false
		}
		switch v := p.Value; {
		case scalar(v):
		case v.Type.Is("array"):
			if v.Items == nil || v.Items.Value == nil || !scalar(v.Items.Value) {
				return false
			}
		case v.Type.Is("object"):
			enc := mt.Encoding[name]
			if enc == nil {
				return false
			}
			sm := enc.SerializationMethod()
			if sm.Style != openapi3.SerializationDeepObject && (sm.Style != openapi3.SerializationForm || sm.Explode) {
				return false
			}
			for _, q := range v.Properties {
				if q.Value == nil || !scalar(q.Value) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// scalar reports whether s is a single string, number, integer or
// boolean, with no union to decide between.
func scalar(s *openapi3.Schema) bool {
	if len(s.OneOf)+len(s.AnyOf)+len(s.AllOf) > 0 || s.Type == nil {
		return false
	}
	return s.Type.Is("string") || s.Type.Is("integer") || s.Type.Is("number") || s.Type.Is("boolean")
}
