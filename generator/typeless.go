package generator

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// typelessResponses gives the JSON response bodies whose schema says
// nothing of their shape the type idem.JSONValue. oapi-codegen makes them
// interface{} and declares the strict server's methods on that, which Go
// does not allow; idem.JSONValue holds any value and encodes as it, so
// the body sent is the same.
func (r *resolver) typelessResponses(scan *nameScan, defs []codegen.OperationDefinition) bool {
	visited := map[string]bool{}
	for _, m := range scan.interfaceMethods {
		if strings.HasPrefix(m.method, "Visit") && !r.done["interface "+m.recv] {
			visited[m.recv] = true
		}
	}
	if len(visited) == 0 {
		return false
	}
	changed := false
	for _, op := range defs {
		for _, resp := range op.Responses {
			for _, c := range resp.Contents {
				name := op.OperationId + resp.StatusCode + c.NameTagOrContentType() + "Response"
				if !visited[name] || op.Spec == nil || op.Spec.Responses == nil {
					continue
				}
				ref := op.Spec.Responses.Value(resp.StatusCode)
				if ref == nil || ref.Value == nil {
					continue
				}
				mt := ref.Value.Content[c.ContentType]
				if mt == nil {
					continue
				}
				if mt.Schema != nil && mt.Schema.Value != nil {
					if _, set := mt.Schema.Value.Extensions["x-go-type"]; set {
						continue
					}
				}
				s := &openapi3.Schema{Extensions: map[string]any{
					"x-go-type":        "idem.JSONValue",
					"x-go-type-import": map[string]any{"path": idemImport},
				}}
				if mt.Schema != nil && mt.Schema.Value != nil {
					s.Description = mt.Schema.Value.Description
				}
				mt.Schema = &openapi3.SchemaRef{Value: s}
				r.done["interface "+name] = true
				delete(visited, name)
				r.found = append(r.found, resolution{mediaOrigin(mt), fmt.Sprintf("the %s response of %s %s (%s) has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue, which holds any JSON value: return %s(idem.JSONOf(v))", resp.StatusCode, op.Method, op.Path, c.ContentType, name)})
				changed = true
			}
		}
	}
	return changed
}

// mediaOrigin is where the spec writes mt, or nil when the loader did not
// say.
func mediaOrigin(mt *openapi3.MediaType) *openapi3.Location {
	if mt.Origin == nil {
		return nil
	}
	return mt.Origin.Key
}

// origin is where the spec writes s, or nil when the loader did not say.
func origin(s *openapi3.Schema) *openapi3.Location {
	if s == nil || s.Origin == nil {
		return nil
	}
	return s.Origin.Key
}
