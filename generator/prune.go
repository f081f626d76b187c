package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// keepPruned runs oapi-codegen again with output-options.skip-prune on a
// fresh copy of the document when its output names types it does not
// declare: oapi-codegen prunes the schemas no path uses, and keeps the
// webhooks' types that name them. If that does not declare them all, the
// first output stands.
func (r *resolver) keepPruned(spec *openapi3.T, load func() (*openapi3.T, error), conf codegen.Configuration, code string, scan *nameScan, missing []string) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	fresh, err := load()
	if err != nil {
		return code, spec, scan, conf, nil
	}
	kept := conf
	kept.OutputOptions.SkipPrune = true
	if all, err := r.mode.generate(fresh, kept); err == nil {
		if s, err := r.mode.scan(all); err == nil && len(s.undeclaredNames()) == 0 {
			r.keptPruned(fresh, missing)
			return all, fresh, s, kept, nil
		}
	}
	return r.regenerate(spec, conf, code, scan)
}

// keptPruned reports that fresh was generated with skip-prune, for the
// missing types; resolveAhead does so too when it predicts them.
func (r *resolver) keptPruned(fresh *openapi3.T, missing []string) {
	missing = slices.Sorted(slices.Values(missing))
	schemas, loc := r.prunedSchemas(fresh, missing)
	r.found = append(r.found, resolution{loc, fmt.Sprintf("oapi-codegen prunes the schemas no path uses, yet the webhooks' types name %s; generated with oapi-codegen.output-options.skip-prune: true, which keeps every schema (set it in the config to say so)", prunedWhat(missing, schemas))})
}

// keepReferred is keepPruned without the option, for the augmented spec:
// it adds a keeper (carry.go), a schema that refers to the schemas
// missing and to itself, which oapi-codegen does not prune.
func (r *resolver) keepReferred(spec *openapi3.T, load func() (*openapi3.T, error), conf codegen.Configuration, code string, scan *nameScan, missing []string) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	fresh, err := load()
	if err != nil {
		return code, spec, scan, conf, nil
	}
	schemas, loc := r.prunedSchemas(fresh, missing)
	if len(schemas) < len(missing) {
		return r.regenerate(spec, conf, code, scan) // types of no schema: a keeper cannot keep them
	}
	k := &keeper{name: freeName(componentNames(fresh), "IdemgenKeptSchemas"), schemas: schemas}
	k.add(fresh)
	if all, err := r.mode.generate(fresh, conf); err == nil {
		if s, err := r.mode.scan(all); err == nil && len(s.undeclaredNames()) == 0 {
			r.keep = k
			them := "them"
			if len(schemas) == 1 {
				them = "it"
			}
			r.found = append(r.found, resolution{loc, fmt.Sprintf("oapi-codegen leaves the schemas no path uses out of a client's models, yet the webhooks' types name %s; "+
				"kept %s with components.schemas.%s, which refers to %[2]s and to itself (a client generated with output-options.skip-prune: true does not need it)", prunedWhat(missing, schemas), them, k.name)})
			return all, fresh, s, conf, nil
		}
	}
	return r.regenerate(spec, conf, code, scan)
}

// prunedSchemas returns the schemas of fresh whose types are the missing
// ones, and where the first is written.
func (r *resolver) prunedSchemas(fresh *openapi3.T, missing []string) ([]string, *openapi3.Location) {
	var schemas []string
	var loc *openapi3.Location
	for _, name := range missing {
		if schema, ok := componentNamed(fresh, name); ok {
			schemas = append(schemas, schema)
			if loc == nil {
				loc = r.locateIn(fresh, fresh.Components.Schemas[schema].Value)
			}
		}
	}
	return schemas, loc
}

// prunedWhat names the schemas kept, or the types when they are not
// all schemas.
func prunedWhat(missing, schemas []string) string {
	switch {
	case len(schemas) == 1:
		return "schema " + schemas[0]
	case len(schemas) > 0:
		return "schemas " + strings.Join(schemas, ", ")
	case len(missing) == 1:
		return "type " + missing[0]
	}
	return "types " + strings.Join(missing, ", ")
}

// regenerate runs oapi-codegen on spec again, whose output (code, scan)
// stands, so that what follows sees spec's state: oapi-codegen keeps its
// state in package variables.
func (r *resolver) regenerate(spec *openapi3.T, conf codegen.Configuration, code string, scan *nameScan) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	if _, err := codegen.Generate(spec, conf); err != nil {
		return "", nil, nil, conf, fmt.Errorf("%s: oapi-codegen: %w", r.specPath, err)
	}
	return code, spec, scan, conf, nil
}

// componentNamed returns the schema of components whose type has the Go
// name goName.
func componentNamed(spec *openapi3.T, goName string) (string, bool) {
	if spec.Components == nil {
		return "", false
	}
	for _, name := range codegen.SortedSchemaKeys(spec.Components.Schemas) {
		if codegen.SchemaNameToTypeName(name) == goName {
			return name, true
		}
		if s := spec.Components.Schemas[name].Value; s != nil {
			if n, ok := s.Extensions["x-go-name"].(string); ok && n == goName {
				return name, true
			}
		}
	}
	return "", false
}
