package generator

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"gopkg.in/yaml.v3"
)

// Errors is the config's errors section: the API's own error shape, in
// which the layer renders the answers it gives itself (see
// idem.ErrorShape). For a Stripe-style API:
//
//	errors:
//	  schema: "#/components/schemas/Error"
//	  envelope: error
//	  members: {code: code, detail: message}
//	  fixed: {type: idempotency_error}
//	  retry-header: Stripe-Should-Retry
type Errors struct {
	// Schema is the local $ref of the schema of the API's error bodies;
	// the augmented spec declares the layer's answers with it.
	Schema string `yaml:"schema"`
	// ContentType is the answers' media type; "" is application/json.
	ContentType string `yaml:"content-type"`
	// Envelope is the member that holds the error object, if any.
	Envelope string `yaml:"envelope"`
	// Members name the members that carry each part of a problem.
	Members ErrorMembers `yaml:"members"`
	// Fixed are members with the same string in every answer.
	Fixed map[string]string `yaml:"fixed"`
	// RetryHeader is sent "true" or "false": whether a retry with the same
	// key is right.
	RetryHeader string `yaml:"retry-header"`
}

// ErrorMembers name the members of the API's error object that carry the
// parts of a problem; an empty one leaves its part out.
type ErrorMembers struct {
	Type   string `yaml:"type"`   // the problem type's URI
	Code   string `yaml:"code"`   // its short name, such as idempotency-key-reused
	Title  string `yaml:"title"`  // a short summary
	Detail string `yaml:"detail"` // what happened and what to do next
	Status string `yaml:"status"` // the HTTP status, a number
	Retry  string `yaml:"retry"`  // whether a retry with the same key is right, a boolean
}

// check reports what in the section cannot work.
func (e *Errors) check() []string {
	var problems []string
	if !strings.HasPrefix(e.Schema, "#/") {
		problems = append(problems, fmt.Sprintf("errors.schema %q is not a local $ref; expected the error schema's reference in the spec, e.g. \"#/components/schemas/Error\"", e.Schema))
	}
	m := e.Members
	if m.Type == "" && m.Code == "" {
		problems = append(problems, "errors.members sets neither type nor code, so clients could not tell the answers apart; set members.code (a short name) or members.type (a URI) to a member of the error object")
	}
	if m.Detail == "" && m.Title == "" {
		problems = append(problems, "errors.members sets neither detail nor title, so the answers would not say what to do next; set members.detail to the member that carries the message")
	}
	if e.RetryHeader != "" && !validHeaderName(e.RetryHeader) {
		problems = append(problems, fmt.Sprintf("errors.retry-header %q is not a header name", e.RetryHeader))
	}
	seen := map[string]string{}
	for _, part := range []struct{ key, member string }{{"type", m.Type}, {"code", m.Code}, {"title", m.Title}, {"detail", m.Detail}, {"status", m.Status}, {"retry", m.Retry}} {
		if part.member == "" {
			continue
		}
		if other, dup := seen[part.member]; dup {
			problems = append(problems, fmt.Sprintf("errors.members.%s and errors.members.%s both name member %q; expected one member per part", other, part.key, part.member))
		}
		seen[part.member] = part.key
	}
	return problems
}

func validHeaderName(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
	}) < 0 && http.CanonicalHeaderKey(s) != ""
}

// Shape is the section as the runtime's error shape, as the generated
// IdempotencyErrorShape returns it.
func (e *Errors) Shape() *idem.ErrorShape {
	return &idem.ErrorShape{
		ContentType: e.ContentType,
		Envelope:    e.Envelope,
		Type:        e.Members.Type,
		Code:        e.Members.Code,
		Title:       e.Members.Title,
		Detail:      e.Members.Detail,
		Status:      e.Members.Status,
		RetryMember: e.Members.Retry,
		Fixed:       maps.Clone(e.Fixed),
		RetryHeader: e.RetryHeader,
	}
}

// Name is the schema's name, the last token of its reference.
func (e *Errors) Name() string { return e.Schema[strings.LastIndex(e.Schema, "/")+1:] }

// FixedNames are the Fixed members' names, in order.
func (e *Errors) FixedNames() []string { return slices.Sorted(maps.Keys(e.Fixed)) }

// mediaType is the answers' media type.
func (e *Errors) mediaType() string {
	if e.ContentType == "" {
		return "application/json"
	}
	return e.ContentType
}

// checkErrorSchema refuses an errors section whose schema the spec does
// not have, or whose members the schema's object does not declare, at the
// schema's line and column in the spec.
func checkErrorSchema(file string, root *yaml.Node, e *Errors, read func(string) ([]byte, error)) error {
	if why := refProblem(file, root, e.Schema, read); why != "" {
		return fmt.Errorf("%s: errors.schema %q %s", file, e.Schema, why)
	}
	schema := resolveLocal(root, pointerTo(root, e.Schema))
	at := annotation.Position{File: file, Line: schema.Line, Column: schema.Column}
	if k := keyOf(root, e.Schema); k != nil {
		at.Line, at.Column = k.Line, k.Column // the schema's name
	}
	fail := func(format string, args ...any) error {
		return &annotation.Error{Pos: at, Msg: fmt.Sprintf("the error schema %s (errors.schema in the config): ", e.Name()) + fmt.Sprintf(format, args...)}
	}
	obj := schema
	if e.Envelope != "" {
		obj = resolveLocal(root, get(get(schema, "properties"), e.Envelope))
		if obj == nil {
			return fail("has no property %q, which errors.envelope names; expected the member that holds the error object", e.Envelope)
		}
	}
	props := get(obj, "properties")
	if props == nil {
		return nil // an object of any members: nothing to check against
	}
	m := e.Members
	var missing []string
	for _, name := range append([]string{m.Type, m.Code, m.Title, m.Detail, m.Status, m.Retry}, e.FixedNames()...) {
		if name != "" && get(props, name) == nil {
			missing = append(missing, fmt.Sprintf("%q", name))
		}
	}
	if len(missing) > 0 {
		return fail("its error object has no member %s, which errors.members or errors.fixed names; expected members the schema declares", strings.Join(missing, ", "))
	}
	return nil
}

// pointerTo follows a local reference ("#/a/b") from root.
func pointerTo(root *yaml.Node, ref string) *yaml.Node {
	n := root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		n = child(n, strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
	}
	return n
}

// keyOf is the mapping key that a local reference's last token names, or
// nil when that is an array's item.
func keyOf(root *yaml.Node, ref string) *yaml.Node {
	i := strings.LastIndex(ref, "/")
	parent := pointerTo(root, ref[:i])
	name := strings.NewReplacer("~1", "/", "~0", "~").Replace(ref[i+1:])
	if parent == nil || parent.Kind != yaml.MappingNode {
		return nil
	}
	for j := 0; j+1 < len(parent.Content); j += 2 {
		if parent.Content[j].Value == name {
			return parent.Content[j]
		}
	}
	return nil
}

// resolveLocal follows n's local $ref, if it has one, a few times over.
func resolveLocal(root, n *yaml.Node) *yaml.Node {
	for range 8 {
		ref := get(n, "$ref")
		if ref == nil || !strings.HasPrefix(ref.Value, "#/") {
			return n
		}
		n = pointerTo(root, ref.Value)
	}
	return n
}

// errorSchemaOf checks the errors section against the spec in src.
func errorSchemaOf(file string, src []byte, e *Errors, read func(string) ([]byte, error)) error {
	doc, err := annotation.Parse(file, src)
	if err != nil {
		return err
	}
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	return checkErrorSchema(file, root, e, read)
}
