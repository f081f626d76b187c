package generator

import (
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// fingerprint.include is the complement of exclude: only the parameters
// and body members it lists count, besides the operation's name, which
// always does. A webhook's body that carries a delivery time, new on each
// redelivery, is the case for it: with include: [/id, /type, /data] a
// redelivery matches the first delivery.

// includeParams is fingerprintParams for an operation with
// fingerprint.include: the parameters it names count, and no other.
func includeParams(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	included, err := listedParams(d, "include", a.FingerprintInclude)
	if err != nil {
		return err
	}
	left := make(map[*codegen.ParameterDefinition]bool)
	for _, params := range [][]codegen.ParameterDefinition{d.PathParams, d.QueryParams, d.HeaderParams} {
		for i, p := range params {
			if !included[&params[i]] && !(p.In == "header" && strings.EqualFold(p.ParamName, "Idempotency-Key")) {
				left[&params[i]] = true
				op.excludedParams = append(op.excludedParams, [2]string{p.In, p.ParamName})
			}
		}
	}
	op.Fingerprint.Selected = true
	for _, p := range a.FingerprintInclude {
		op.include = append(op.include, p.Value)
	}
	op.Fingerprint.Path = paramParts(d.PathParams, "request.", left)
	op.Fingerprint.Query = paramParts(d.QueryParams, "request.Params.", left)
	op.Fingerprint.Header = paramParts(d.HeaderParams, "request.Params.", left)
	return nil
}

// includeBodyPointers checks fingerprint.include's JSON pointers against
// the JSON request body's schema and sets them as the members of the body
// that alone count; tags are the bodies' tags when it has several. With
// no pointer, the body does not count at all.
func includeBodyPointers(op *operation, a annotation.Operation, d codegen.OperationDefinition, jsonSchema *openapi3.Schema, tags []string) error {
	for _, p := range a.FingerprintInclude {
		if !strings.HasPrefix(p.Value, "/") {
			continue // a parameter, counted by paramParts
		}
		if jsonSchema == nil {
			return annotationError(op, p.Pos, "fingerprint.include %s: the operation has no JSON request body to include from", p.Value)
		}
		if err := checkPointer(jsonSchema, p.Value); err != nil {
			return annotationError(op, p.Pos, "fingerprint.include %s: %v", p.Value, err)
		}
		op.includeBody = append(op.includeBody, p)
		if len(tags) == 0 {
			op.Fingerprint.Include = append(op.Fingerprint.Include, p.Value)
			continue
		}
		// With several media types the pointer applies under each tag,
		// as exclude's do; a form's field is spelled as deepObject does.
		for i, tag := range tags {
			switch ct := d.Bodies[i].ContentType; {
			case isForm(ct):
				op.Fingerprint.Include = append(op.Fingerprint.Include, "/"+tag+"/"+formKey(p.Value))
			case d.Bodies[i].IsJSON():
				op.Fingerprint.Include = append(op.Fingerprint.Include, "/"+tag+p.Value)
			default:
				// A text or multipart body has no members to pick:
				// none of it would count, and two different bodies would
				// replay one answer.
				return annotationError(op, p.Pos, "fingerprint.include %s: request body %s has no members for a JSON pointer to name, so none of it would count; expected fingerprint.exclude, which leaves such a body whole, or no %s body", p.Value, ct, ct)
			}
		}
	}
	return nil
}
