package generator

import (
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// typeDef is a type oapi-codegen declares for a schema.
type typeDef struct {
	codegen.TypeDefinition
	// inline is whether the schema is one written inside another, whose
	// type oapi-codegen names from its place (x-go-type-name renames it),
	// rather than a component or an operation's body or parameters.
	inline bool
}

func (t typeDef) schema() *openapi3.Schema { return t.Schema.OAPISchema }

// typeSet is what oapi-codegen builds of a spec's schemas and operations
// before it renders them.
type typeSet struct {
	// components are the types of the components' schemas, parameters,
	// responses and request bodies, in oapi-codegen's order.
	components []codegen.TypeDefinition
	// paths are the operations of the paths; ops are those, the
	// webhooks' and the callbacks', and responseTypes the types of each
	// of ops' responses.
	paths, ops    []codegen.OperationDefinition
	responseTypes [][]codegen.TypeDefinition
	// byName are the types oapi-codegen declares for the spec's schemas,
	// by Go name, each inline type too.
	byName map[string][]typeDef
}

// collectTypes returns the types oapi-codegen declares for the spec, as
// it builds them. It must run right after codegen.Generate on spec, whose
// package state it reads.
func collectTypes(spec *openapi3.T, conf codegen.Configuration) (*typeSet, error) {
	ts := &typeSet{}
	components := map[*openapi3.Schema]bool{}
	if c := spec.Components; c != nil {
		for _, s := range c.Schemas {
			if s != nil && s.Value != nil {
				components[s.Value] = true
			}
		}
		schemas, err := codegen.GenerateTypesForSchemas(nil, c.Schemas, conf.OutputOptions.ExcludeSchemas)
		if err != nil {
			return nil, err
		}
		params, err := codegen.GenerateTypesForParameters(nil, c.Parameters)
		if err != nil {
			return nil, err
		}
		responses, err := codegen.GenerateTypesForResponses(nil, c.Responses)
		if err != nil {
			return nil, err
		}
		bodies, err := codegen.GenerateTypesForRequestBodies(nil, c.RequestBodies)
		if err != nil {
			return nil, err
		}
		ts.components = slices.Concat(schemas, params, responses, bodies)
	}
	var err error
	if ts.paths, err = codegen.OperationDefinitions(spec); err != nil {
		return nil, err
	}
	webhooks, err := codegen.WebhookOperationDefinitions(spec)
	if err != nil {
		return nil, err
	}
	callbacks, err := codegen.CallbackOperationDefinitions(spec)
	if err != nil {
		return nil, err
	}
	ts.ops = slices.Concat(ts.paths, webhooks, callbacks)
	top := slices.Clone(ts.components)
	for _, op := range ts.ops {
		top = append(top, op.TypeDefinitions...)
		top = append(top, codegen.GenerateTypeDefsForOperation(op)...)
		responses, err := op.GetResponseTypeDefinitions()
		if err != nil {
			return nil, err
		}
		var types []codegen.TypeDefinition
		for _, r := range responses {
			types = append(types, r.AdditionalTypeDefinitions...)
		}
		ts.responseTypes = append(ts.responseTypes, types)
		top = append(top, types...)
	}
	ts.byName = map[string][]typeDef{}
	type key struct {
		name   string
		schema *openapi3.Schema
	}
	seen := map[key]bool{}
	var add func(td codegen.TypeDefinition)
	add = func(td codegen.TypeDefinition) {
		k := key{td.TypeName, td.Schema.OAPISchema}
		if seen[k] {
			return
		}
		seen[k] = true
		inline := strings.Contains(td.JsonName, ".") && td.Schema.OAPISchema != nil && !components[td.Schema.OAPISchema]
		ts.byName[td.TypeName] = append(ts.byName[td.TypeName], typeDef{td, inline})
		for _, a := range td.Schema.AdditionalTypes {
			add(a)
		}
	}
	for _, td := range top {
		add(td)
	}
	return ts, nil
}
