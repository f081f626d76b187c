package generator

import (
	"fmt"

	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// annotate fills in op, an operation of oapi-codegen's, from its
// x-idempotent annotation a.
func annotate(cfg *Config, op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	op.Idempotent = true
	op.pos = a.Pos
	if a.OperationID != "" {
		op.Name = a.OperationID // oapi-codegen may have normalised its copy
	}
	op.Field = lowerFirst(op.GoName) + "Op"
	op.Answer = lowerFirst(op.GoName) + "Answer"
	op.KeyOptional = !a.Required
	op.ClientMethods = clientMethods(d)
	if err := declaredKey(op, a, d); err != nil {
		return err
	}
	if err := keyPlacement(op, a, d); err != nil {
		return err
	}
	op.TTL, op.Lease = a.TTL, a.Lease
	op.MaxBody = a.MaxBody
	op.Validate = a.Validate
	op.def = d
	if err := annotateScope(op, a, d); err != nil {
		return err
	}
	if a.Mode == annotation.ModePhased || a.Mode == annotation.ModeAsync {
		op.Points = recoveryPoints(op.GoName, a.RecoveryPoints)
	}
	if a.Mode == annotation.ModeAsync && cfg.Jobs == JobsNone {
		return annotationError(op, a.ModePos, "mode: async runs requests on River workers, and the config says jobs: none; expected jobs: river in the config, or mode: atomic or phased")
	}
	if a.Mode == annotation.ModeAsync && d.Spec != nil && d.Spec.Responses != nil && d.Spec.Responses.Value("202") != nil {
		return annotationError(op, a.ModePos, "mode: async answers 202 Accepted itself, with the status resource, and the operation declares a 202 of its own; expected its final responses only, such as a 201")
	}
	if a.Mode == annotation.ModeAsync {
		op.Async, op.StatusPath, op.StatusGoName = true, a.Status, codegen.ToCamelCase(statusOperationID(a))
	}
	if a.Abandoned != "" {
		op.Abandoned = a.Abandoned
		op.CompleteAfter = a.CompleteAfter
	}
	if err := fingerprintParams(op, a, d); err != nil {
		return err
	}
	return annotateBodies(op, a, d)
}

// annotationError is a problem with op's annotation, at pos.
func annotationError(op *operation, pos annotation.Position, format string, args ...any) error {
	return &annotation.Error{Pos: pos, Msg: fmt.Sprintf("x-idempotent on %s %s: ", op.Method, op.Path) + fmt.Sprintf(format, args...)}
}

// annotateScope sets what scopes the operation's keys.
func annotateScope(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	if a.Scope.Header != "" {
		header, err := scopeHeader(d, a)
		if err != nil {
			return err
		}
		op.ScopeHeader = header
	}
	op.ScopeDoc = scopeDoc(a.Scope, op.ScopeHeader)
	op.scopeFunction = a.Scope.Function
	return nil
}

// recoveryPoints are the recovery points of the phased operation goName,
// as the annotation names them.
func recoveryPoints(goName string, names []string) []recoveryPoint {
	var points []recoveryPoint
	for _, p := range names {
		pointName := annotation.GoName(p)
		points = append(points, recoveryPoint{Name: p, Const: goName + pointName, Phase: goName + "After" + pointName})
	}
	return points
}

// annotateBodies sets the media types the operation accepts and what its
// fingerprint holds of the request body, and checks that its bodies can
// be fingerprinted, stored and replayed.
func annotateBodies(op *operation, a annotation.Operation, d codegen.OperationDefinition) error {
	jsonSchema, body, tags, err := requestBody(d)
	multipart := acceptBodies(op, d)
	if err != nil {
		return annotationError(op, a.Pos, "%v", err)
	}
	if err := checkCompletable(op, a, multipart); err != nil {
		return err
	}
	op.Fingerprint.Body = body
	if err := replayable(d); err != nil {
		return annotationError(op, a.Pos, "%v", err)
	}
	if len(a.FingerprintInclude) > 0 {
		return includeBodyPointers(op, a, d, jsonSchema, tags)
	}
	return excludeBodyPointers(op, a, d, jsonSchema, tags)
}

// acceptBodies sets the media types of the operation's request bodies and
// the field of a multipart one; it returns the multipart body's media
// type, "" when there is none.
func acceptBodies(op *operation, d codegen.OperationDefinition) (multipart string) {
	for _, b := range d.Bodies {
		op.Accept = append(op.Accept, b.ContentType)
		if b.IsJSON() {
			op.AcceptJSON = append(op.AcceptJSON, b.ContentType)
		}
		if b.NameTag == "Multipart" {
			multipart = b.ContentType
			op.Multipart = "Body"
			if len(d.Bodies) > 1 {
				op.Multipart = "MultipartBody"
			}
		}
	}
	return multipart
}

// checkCompletable refuses abandoned: complete and mode: async for an
// operation with a multipart request body.
func checkCompletable(op *operation, a annotation.Operation, multipart string) error {
	if a.Mode == annotation.ModeAsync && multipart != "" {
		// A worker runs the request from the copy stored with its key.
		return annotationError(op, a.ModePos, "mode: async: request body %s is a stream, which cannot be stored for a worker to run the request from; expected a JSON or form request body, or mode: atomic", multipart)
	}
	if a.Abandoned != annotation.AbandonedComplete || multipart == "" {
		return nil
	}
	// The completer resumes an attempt with the request stored as
	// JSON when the handler first received it; a multipart body is
	// a stream, read once.
	pos := a.Pos
	if a.AbandonedAt != nil {
		pos = *a.AbandonedAt
	}
	return annotationError(op, pos, "abandoned: complete: request body %s is a stream, which the completer cannot store to resume the attempt with; expected abandoned: fail, or a JSON request body", multipart)
}
