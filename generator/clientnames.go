package generator

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// free returns name, or name with the smallest number from 2 appended
// that makes it one that neither the output declares nor an earlier
// resolution chose, and takes it.
func (r *resolver) free(scan *nameScan, name string) string {
	try := name
	for i := 2; ; i++ {
		if _, declared := scan.declared[try]; !declared && !r.taken[try] {
			r.taken[try] = true
			return try
		}
		try = name + strconv.Itoa(i)
	}
}

// clientResponses turns on oapi-codegen's own
// output-options.resolve-type-name-collisions when the client's response
// type of an operation (<Operation>Response) is named like another
// declaration, a schema's type usually (OpenAI's DeleteAssistantResponse
// and the operation deleteAssistant): oapi-codegen then names the
// client's type apart, and only the client's Go API changes.
func (r *resolver) clientResponses(scan *nameScan, defs []codegen.OperationDefinition, conf *codegen.Configuration) bool {
	if !conf.Generate.Client || conf.OutputOptions.ResolveTypeNameCollisions {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	byWrapper := map[string]codegen.OperationDefinition{}
	for _, op := range defs {
		byWrapper[op.OperationId+suffix] = op
	}
	for _, name := range scan.dups {
		if op, ok := byWrapper[name]; ok && !r.done["client "+name] {
			r.done["client "+name] = true
			r.clients = append(r.clients, op)
		}
	}
	if len(r.clients) == 0 {
		return false
	}
	conf.OutputOptions.ResolveTypeNameCollisions = true
	return true
}

// clientNamed is whether a name declared twice is the client's response
// type of an operation, which clientResponses resolves with an option of
// oapi-codegen's.
func (r *resolver) clientNamed(scan *nameScan, defs []codegen.OperationDefinition, conf codegen.Configuration) bool {
	if !conf.Generate.Client || conf.OutputOptions.ResolveTypeNameCollisions {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	for _, op := range defs {
		if _, dup := scan.decls[op.OperationId+suffix]; dup {
			return true
		}
	}
	return false
}

// reportClientResponses adds the resolution of the client's response
// types, with the names they have in the final output.
func (r *resolver) reportClientResponses(scan *nameScan) {
	if len(r.clients) == 0 {
		return
	}
	var renames []string
	var loc *openapi3.Location
	for _, op := range r.clients {
		now := scan.resultOf("ClientWithResponses", op.OperationId+"WithResponse")
		renames = append(renames, fmt.Sprintf("%s %s's is %s", op.Method, op.Path, cmp.Or(now, "renamed")))
		if loc == nil && op.Spec != nil && op.Spec.Origin != nil {
			loc = op.Spec.Origin.Key
		}
	}
	text := fmt.Sprintf("oapi-codegen names the client's response types of %d operations like other declarations; generated with oapi-codegen.output-options.resolve-type-name-collisions: true, which names them apart: %s", len(renames), strings.Join(renames, ", "))
	if len(renames) == 1 {
		text = fmt.Sprintf("oapi-codegen names the client's response type of %s %s like another declaration; generated with oapi-codegen.output-options.resolve-type-name-collisions: true, which names it %s", r.clients[0].Method, r.clients[0].Path, cmp.Or(scan.resultOf("ClientWithResponses", r.clients[0].OperationId+"WithResponse"), "apart"))
	}
	r.found = append(r.found, resolution{loc, text})
}

// clientResponseNames is clientResponses without the option, for the
// augmented spec: where the client's response type of an operation
// (<Operation>Response) is named like a component's type (OpenAI's
// schema DeleteAssistantResponse, and the operation deleteAssistant),
// the component's type is named apart with x-go-name: its name with
// "Body" appended where it is the body of one of the operation's
// responses, "Type" otherwise. Its JSON is unchanged; types written
// inline are left to typeNames.
func (r *resolver) clientResponseNames(scan *nameScan, defs []codegen.OperationDefinition, spec *openapi3.T, conf codegen.Configuration) bool {
	if !conf.Generate.Client || spec.Components == nil {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	byWrapper := map[string]codegen.OperationDefinition{}
	for _, op := range defs {
		byWrapper[op.OperationId+suffix] = op
	}
	var renames []string
	var loc *openapi3.Location
	var single string
	for _, name := range scan.dups {
		op, ok := byWrapper[name]
		if !ok || r.done["client "+name] {
			continue
		}
		r.done["client "+name] = true
		c, ok := namedComponent(spec, name)
		if !ok {
			continue
		}
		chosen := r.free(scan, name+c.suffix(op))
		c.extensions()["x-go-name"] = chosen
		r.extended = append(r.extended, extended{pointer: c.pointer, key: "x-go-name", value: chosen})
		renames = append(renames, fmt.Sprintf("%s's type is %s", c.what(), chosen))
		if loc == nil {
			loc = r.position(c.pointer)
			single = fmt.Sprintf("oapi-codegen names the client's response type of %s %s like the type of %s; named the %s's type %s with x-go-name, which changes no JSON",
				op.Method, op.Path, c.what(), strings.TrimSuffix(c.section, "s"), chosen)
		}
	}
	if len(renames) == 0 {
		return false
	}
	const option = " (a client generated with output-options.resolve-type-name-collisions: true names the client's response types apart instead)"
	count := len(renames)
	const listed = 6
	if count > listed {
		renames = append(renames[:listed], fmt.Sprintf("and %d more", count-listed))
	}
	text := fmt.Sprintf("oapi-codegen names the client's response types of %d operations like the types of components; named those types apart with x-go-name, which changes no JSON: %s", count, strings.Join(renames, ", "))
	if count == 1 {
		text = single
	}
	r.found = append(r.found, resolution{loc, text + option})
	return true
}

// component is a schema, response, request body or parameter of
// components, which oapi-codegen gives a type named after it.
type component struct {
	section, name, pointer string
	schema                 *openapi3.Schema // for a schema
	ext                    *map[string]any
}

func (c component) extensions() map[string]any {
	if *c.ext == nil {
		*c.ext = map[string]any{}
	}
	return *c.ext
}

func (c component) what() string {
	return strings.TrimSuffix(c.section, "s") + " " + c.name
}

// suffix is what c's type name gets to be told from op's response type.
func (c component) suffix(op codegen.OperationDefinition) string {
	if c.schema == nil || op.Spec == nil || op.Spec.Responses == nil {
		return "Type"
	}
	for _, resp := range op.Spec.Responses.Map() {
		if resp == nil || resp.Value == nil {
			continue
		}
		for _, mt := range resp.Value.Content {
			if mt != nil && mt.Schema != nil && mt.Schema.Value == c.schema {
				return "Body"
			}
		}
	}
	return "Type"
}

// namedComponent returns the component whose type oapi-codegen names
// goName, unless the spec names it so itself (x-go-name).
func namedComponent(spec *openapi3.T, goName string) (component, bool) {
	c := spec.Components
	named := func(section, name string, ext *map[string]any) (component, bool) {
		if _, ok := (*ext)["x-go-name"]; ok {
			return component{}, false // the spec names it itself
		}
		if codegen.SchemaNameToTypeName(name) != goName {
			return component{}, false
		}
		return component{section: section, name: name, pointer: "/components/" + section + "/" + escapePointer(name), ext: ext}, true
	}
	for _, name := range codegen.SortedSchemaKeys(c.Schemas) {
		if s := c.Schemas[name]; s != nil && s.Ref == "" && s.Value != nil {
			if found, ok := named("schemas", name, &s.Value.Extensions); ok {
				found.schema = s.Value
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.Responses) {
		if v := c.Responses[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("responses", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.RequestBodies) {
		if v := c.RequestBodies[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("requestBodies", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.Parameters) {
		if v := c.Parameters[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("parameters", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	return component{}, false
}
