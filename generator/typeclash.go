package generator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// typeNames renames the types of inline schemas that oapi-codegen names
// like another declaration: the type of an enum property of a schema
// named like the strict server's response type of an operation (OpenAI's
// DeleteAssistantResponse.object and the operation deleteAssistant), or
// the items of an array in an anyOf named like the array itself (Stripe's
// form bodies). The inline schema gets x-go-type-name, its name with
// "Item", "Enum" or "Type" appended, which changes no JSON.
func (r *resolver) typeNames(scan *nameScan, tds map[string][]typeDef) bool {
	changed := false
	for _, name := range scan.dups {
		if r.done["type "+name] || r.done["const "+name] {
			continue
		}
		decls := scan.decls[name]
		var inline []typeDef
		seen := map[*openapi3.Schema]bool{}
		for _, td := range tds[name] {
			if td.inline && !seen[td.schema()] {
				seen[td.schema()] = true
				inline = append(inline, td)
			}
		}
		if len(inline) == 0 {
			continue
		}
		// Another declaration keeps the name: one that is not an inline
		// schema's type, else the outermost of them.
		var keeper *typeDef
		rename := inline
		if len(decls) <= len(inline) {
			slices.SortStableFunc(inline, func(a, b typeDef) int {
				return cmp.Compare(itemOf(inline, a), itemOf(inline, b))
			})
			keeper, rename = &inline[0], inline[1:]
		}
		for _, td := range rename {
			s := td.schema()
			if _, set := s.Extensions["x-go-type-name"]; set {
				continue // the spec names it itself
			}
			suffix, what := "Type", "schema"
			items := keeper != nil && keeper.schema().Items != nil && keeper.schema().Items.Value == s
			switch {
			case items:
				suffix = "Item"
			case len(td.Schema.EnumValues) > 0:
				suffix, what = "Enum", "enum"
			}
			chosen := r.free(scan, name+suffix)
			if s.Extensions == nil {
				s.Extensions = map[string]any{}
			}
			s.Extensions["x-go-type-name"] = chosen
			r.extend(s, "x-go-type-name")
			var text string
			if items {
				text = fmt.Sprintf("oapi-codegen gives the items of the array at %s the array's own type name, %s; named their type %s with x-go-type-name, which changes no JSON", keeper.JsonName, name, chosen)
			} else {
				other := "another declaration of its output"
				switch {
				case keeper != nil:
					other = "the type of " + keeper.JsonName
				case strings.HasSuffix(name, "ResponseObject") || strings.HasSuffix(name, "RequestObject"):
					other = "a type of the strict server"
				}
				text = fmt.Sprintf("oapi-codegen names the type of the %s at %s %s, like %s; named it %s with x-go-type-name, which changes no JSON", what, td.JsonName, name, other, chosen)
			}
			r.found = append(r.found, resolution{r.locate(s), text})
			changed = true
		}
		r.done["type "+name] = true
	}
	return changed
}

// itemOf is 1 when td's schema is the items of another's, so that sorting
// by it puts the arrays first.
func itemOf(tds []typeDef, td typeDef) int {
	for _, o := range tds {
		if o.schema().Items != nil && o.schema().Items.Value == td.schema() {
			return 1
		}
	}
	return 0
}
