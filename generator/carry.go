package generator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// carried is what the resolutions of resolve.go changed in the loaded
// document, as changes to the spec's text, for the augmented spec to
// carry: a client generated from it then compiles as idemgen's output
// does, with the same names.
//
// One resolution is not carried: a typeless response body's
// idem.JSONValue (typelessResponses) is for the strict server's
// methods; a client's interface{} compiles, and needs no import of the
// runtime.
type carried struct {
	// hoists come first: they move schemas, and the pointers of the
	// other changes are those of the document after them.
	hoists     []hoist
	extensions []extension
	keep       *keeper
}

// extension is an extension a resolution set on an object of the
// document: a schema, or a component named like another declaration.
type extension struct {
	pointer, key string
	value        any
}

// keeper is a schema that refers to the schemas oapi-codegen would
// prune although its output names them (those only webhooks use), and
// to itself, so that oapi-codegen keeps them all without its
// skip-prune option: it prunes only what nothing refers to. It looks
// for references only in a document with paths, so one without (a 3.1
// document of webhooks) gets an empty paths, which says the same.
type keeper struct {
	name    string
	schemas []string
	paths   bool // add an empty paths
}

// apply makes the changes in root, the document's node. A change whose
// place the document does not have (it is in another file) is left
// out: what it leaves out is the client's to resolve.
func (c carried) apply(root *yaml.Node) {
	for _, h := range c.hoists {
		h.apply(root)
	}
	for _, e := range c.extensions {
		_, n := nodeAt(root, e.pointer)
		if n == nil || n.Kind != yaml.MappingNode {
			continue
		}
		setField(n, e.key, extensionNode(e.value))
	}
	if c.keep != nil {
		schemas := componentSection(root, "schemas")
		setField(schemas, c.keep.name, c.keep.node())
		if c.keep.paths && get(root, "paths") == nil {
			addPaths(root)
		}
	}
}

// addPaths adds an empty paths to root, after info where it has one.
func addPaths(root *yaml.Node) {
	at := len(root.Content)
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "info" {
			at = i + 2
		}
	}
	root.Content = slices.Insert(root.Content, at, str("paths"), &yaml.Node{Kind: yaml.MappingNode})
}

// extensionNode is v, a string or a list of strings (the values of the
// extensions resolutions set), as a node.
func extensionNode(v any) *yaml.Node {
	switch v := v.(type) {
	case []any:
		items := make([]*yaml.Node, len(v))
		for i, item := range v {
			items[i] = extensionNode(item)
		}
		return seq(items...)
	default:
		return str(fmt.Sprint(v))
	}
}

// componentSection returns components.<section> of root, adding it when
// root has none.
func componentSection(root *yaml.Node, section string) *yaml.Node {
	components := get(root, "components")
	if components == nil {
		components = &yaml.Node{Kind: yaml.MappingNode}
		set(root, "components", components)
	}
	sec := get(components, section)
	if sec == nil {
		sec = &yaml.Node{Kind: yaml.MappingNode}
		set(components, section, sec)
	}
	return sec
}

// keeperDescription says what the keeper is to a reader of the spec.
const keeperDescription = "Not a message of this API. It refers to the schemas that only webhooks use (%s), " +
	"which oapi-codegen leaves out of a client's models while the webhooks' types name them, and to itself, " +
	"so that oapi-codegen keeps them: it leaves out only what nothing refers to. " +
	"A client generated with oapi-codegen's output-options.skip-prune: true keeps them without it."

// add adds the keeper to the loaded document doc, and paths if it has
// none.
func (k *keeper) add(doc *openapi3.T) {
	if doc.Paths == nil {
		doc.Paths = openapi3.NewPaths()
		k.paths = true
	}
	doc.Components.Schemas[k.name] = k.schema(doc.Components.Schemas)
}

// schema is the keeper as a schema of the loaded document, refs the
// schemas it refers to, as they are in the document.
func (k *keeper) schema(refs map[string]*openapi3.SchemaRef) *openapi3.SchemaRef {
	s := &openapi3.Schema{
		Type:        &openapi3.Types{openapi3.TypeObject},
		Description: fmt.Sprintf(keeperDescription, strings.Join(k.schemas, ", ")),
		Properties:  openapi3.Schemas{},
		Extensions:  map[string]any{"x-go-type": "struct{}"},
	}
	for _, name := range k.schemas {
		s.Properties[name] = &openapi3.SchemaRef{Ref: "#/components/schemas/" + escapePointer(name), Value: refs[name].Value}
	}
	self := &openapi3.SchemaRef{Value: s}
	s.Properties[k.name] = &openapi3.SchemaRef{Ref: "#/components/schemas/" + escapePointer(k.name), Value: s}
	return self
}

// node is the keeper as written in the augmented spec.
func (k *keeper) node() *yaml.Node {
	props := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range slices.Concat(k.schemas, []string{k.name}) {
		set(props, name, ref("#/components/schemas/"+escapePointer(name)))
	}
	return mapping(
		"description", str(fmt.Sprintf(keeperDescription, strings.Join(k.schemas, ", "))),
		"type", str("object"),
		"properties", props,
		"x-go-type", str("struct{}"),
	)
}

// componentNames holds the names of the spec's schemas, and of their Go
// types, which the name of a schema added to it must not take.
func componentNames(spec *openapi3.T) map[string]bool {
	taken := map[string]bool{}
	if spec.Components == nil {
		return taken
	}
	for name, s := range spec.Components.Schemas {
		taken[name] = true
		taken[codegen.SchemaNameToTypeName(name)] = true
		if s != nil && s.Value != nil {
			if n, ok := s.Value.Extensions["x-go-name"].(string); ok {
				taken[n] = true
			}
		}
	}
	return taken
}

// freeName returns name, or name with the smallest number from 2 that
// taken does not hold, and takes it.
func freeName(taken map[string]bool, name string) string {
	try := name
	for i := 2; taken[try]; i++ {
		try = name + strconv.Itoa(i)
	}
	taken[try] = true
	return try
}
