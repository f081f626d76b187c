package generator

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// fingerprintParams sets the parameters that count in the operation's
// fingerprint and records, for its contract, the ones fingerprint.exclude
// leaves out, or fingerprint.include does not list, and the JSON pointers
// into the body of either.
func fingerprintParams(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	if len(a.FingerprintInclude) > 0 {
		return includeParams(op, a, d)
	}
	excluded, err := listedParams(d, "exclude", a.FingerprintExclude)
	if err != nil {
		return err
	}
	for _, params := range [][]codegen.ParameterDefinition{d.PathParams, d.QueryParams, d.HeaderParams} {
		for i, p := range params {
			if excluded[&params[i]] {
				op.excludedParams = append(op.excludedParams, [2]string{p.In, p.ParamName})
			}
		}
	}
	for _, p := range a.FingerprintExclude {
		if strings.HasPrefix(p.Value, "/") {
			op.excludePointers = append(op.excludePointers, p.Value)
		}
	}
	op.Fingerprint.Path = paramParts(d.PathParams, "request.", excluded)
	op.Fingerprint.Query = paramParts(d.QueryParams, "request.Params.", excluded)
	op.Fingerprint.Header = paramParts(d.HeaderParams, "request.Params.", excluded)
	return nil
}

// paramParts are the parameters that count in the fingerprint, by their
// names in the spec. The Idempotency-Key header is the key, not part of
// the request, and excluded parameters do not count.
func paramParts(params []codegen.ParameterDefinition, prefix string, excluded map[*codegen.ParameterDefinition]bool) []fingerprintPart {
	var parts []fingerprintPart
	for i, p := range params {
		if excluded[&params[i]] || (p.In == "header" && strings.EqualFold(p.ParamName, "Idempotency-Key")) {
			continue
		}
		parts = append(parts, fingerprintPart{Name: p.ParamName, Expr: prefix + p.GoName()})
	}
	return parts
}

// listedParams finds the parameters that fingerprint.exclude or include
// (key) names: its entries that are not JSON pointers. A header's name
// matches in any case, as HTTP compares them; a name the operation does
// not declare is an error that lists the ones it does.
func listedParams(d codegen.OperationDefinition, key string, entries []annotation.Pointer) (map[*codegen.ParameterDefinition]bool, error) {
	listed := make(map[*codegen.ParameterDefinition]bool)
	for _, x := range entries {
		if strings.HasPrefix(x.Value, "/") {
			continue
		}
		found := false
		var names []string
		for _, params := range [][]codegen.ParameterDefinition{d.PathParams, d.QueryParams, d.HeaderParams} {
			for i, p := range params {
				if p.In == "header" && strings.EqualFold(p.ParamName, "Idempotency-Key") {
					continue
				}
				names = append(names, p.ParamName)
				if p.ParamName == x.Value || (p.In == "header" && strings.EqualFold(p.ParamName, x.Value)) {
					listed[&params[i]] = true
					found = true
				}
			}
		}
		if found {
			continue
		}
		msg := fmt.Sprintf("x-idempotent on %s %s: fingerprint.%s %s: the operation has no parameter %q", strings.ToUpper(d.Method), d.Path, key, x.Value, x.Value)
		if len(names) > 0 {
			slices.Sort(names)
			msg += "; expected one of " + strings.Join(names, ", ") + ", or a JSON pointer into the body starting with /"
		} else {
			msg += "; expected a JSON pointer into the body starting with /"
		}
		return nil, &annotation.Error{Pos: x.Pos, Msg: msg}
	}
	return listed, nil
}

// excludeBodyPointers checks fingerprint.exclude's JSON pointers against
// the JSON request body's schema and leaves what they name out of the
// fingerprinted body; tags are the bodies' tags when it has several.
func excludeBodyPointers(op *operation, a annotation.Operation, d codegen.OperationDefinition, jsonSchema *openapi3.Schema, tags []string) error {
	for _, p := range a.FingerprintExclude {
		if !strings.HasPrefix(p.Value, "/") {
			continue // a parameter, left out by paramParts
		}
		if jsonSchema == nil {
			return annotationError(op, p.Pos, "fingerprint.exclude %s: the operation has no JSON request body to exclude from", p.Value)
		}
		if err := checkPointer(jsonSchema, p.Value); err != nil {
			return annotationError(op, p.Pos, "fingerprint.exclude %s: %v", p.Value, err)
		}
		if len(tags) == 0 {
			op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, p.Value)
			continue
		}
		// With several media types the fingerprinted body is an
		// idem.Params of the bodies by tag: the pointer applies under each.
		for i, tag := range tags {
			if isForm(d.Bodies[i].ContentType) {
				op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, "/"+tag+"/"+formKey(p.Value))
				continue
			}
			op.Fingerprint.Exclude = append(op.Fingerprint.Exclude, "/"+tag+p.Value)
		}
	}
	return nil
}

// formKey is the form field a JSON pointer into the body names, as
// deepObject style spells nested members: /metadata/trace_id is
// metadata[trace_id], escaped as a pointer token.
func formKey(pointer string) string {
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		t = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		if i > 0 {
			t = "[" + t + "]"
		}
		tokens[i] = t
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(strings.Join(tokens, ""))
}

// checkPointer checks that a JSON pointer names something the schema can
// hold.
func checkPointer(s *openapi3.Schema, pointer string) error {
	if pointer == "" || pointer[0] != '/' {
		return errors.New("a JSON pointer starts with /")
	}
	at := ""
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		next, known, open := step(s, tok)
		if open {
			return nil // free-form below this point: anything may be there
		}
		if next == nil {
			if len(known) == 0 {
				return fmt.Errorf("the request body schema has nothing under %q", or(at, "/"))
			}
			return fmt.Errorf("the request body schema has no %q under %q; expected one of %s", tok, or(at, "/"), strings.Join(known, ", "))
		}
		s = next
		at += "/" + tok
	}
	return nil
}

// step descends one pointer token into s, looking through allOf, oneOf
// and anyOf. open is true when s accepts members it does not list.
func step(s *openapi3.Schema, tok string) (next *openapi3.Schema, known []string, open bool) {
	for _, c := range flatten(s, nil) {
		if p, ok := c.Properties[tok]; ok && p.Value != nil {
			return p.Value, nil, false
		}
		known = append(known, sortedKeys(c.Properties)...)
	}
	for _, c := range flatten(s, nil) {
		if c.Items != nil && c.Items.Value != nil {
			if _, err := strconv.Atoi(tok); err == nil {
				return c.Items.Value, nil, false
			}
		}
		if ap := c.AdditionalProperties; ap.Schema != nil && ap.Schema.Value != nil {
			return ap.Schema.Value, nil, false
		}
		if ap := c.AdditionalProperties; ap.Has != nil && *ap.Has {
			return nil, nil, true
		}
		if c.Type == nil && len(c.Properties) == 0 && c.Items == nil && len(c.AllOf)+len(c.OneOf)+len(c.AnyOf) == 0 {
			return nil, nil, true
		}
	}
	slices.Sort(known)
	return nil, slices.Compact(known), false
}

func flatten(s *openapi3.Schema, out []*openapi3.Schema) []*openapi3.Schema {
	if s == nil {
		return out
	}
	out = append(out, s)
	for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, r := range refs {
			if r != nil {
				out = flatten(r.Value, out)
			}
		}
	}
	return out
}
