package generator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"gopkg.in/yaml.v3"
)

// An async operation (mode: async) has a status resource: a GET at the
// annotation's status path, which the generated code serves itself. It is
// added to the spec before oapi-codegen runs, so that every server kind
// routes it through the strict handler and its middlewares, as it routes
// the spec's own operations, and to the augmented spec, so that clients
// have it.

// asyncStatusSchema is the schema of a status resource's body, added
// under components (prefixed, as the augmented spec's other additions).
const asyncStatusSchema = "IdempotencyAsyncStatus"

// asyncStatusSchemaJSON is asyncStatusSchema: idem.AsyncStatus.
const asyncStatusSchemaJSON = `{
  "type": "object",
  "description": "The state of a request that was accepted (202) and runs on a worker. Once it is done, response holds its stored response: the answer a retry of the request with its key replays.",
  "required": ["status"],
  "properties": {
    "status": {"type": "string", "enum": ["pending", "running", "succeeded", "failed"], "description": "pending: waiting for a worker; running: a worker runs it; succeeded or failed: done, with a response below 400 or of 400 or more."},
    "recovery_point": {"type": "string", "description": "The last step a handler in phases committed, while it runs."},
    "response": {
      "type": "object",
      "description": "The stored response, once the request is done.",
      "required": ["status"],
      "properties": {
        "status": {"type": "integer", "description": "Its HTTP status."},
        "content_type": {"type": "string"},
        "body": {"description": "Its body: the JSON value itself for a JSON response, else the body as a string."}
      }
    }
  }
}`

// statusOperationID is the operationId of the status resource of async
// operation a.
func statusOperationID(a annotation.Operation) string { return statusID(a.OperationID) }

// statusID is the operationId of the status resource of the async
// operation whose operationId is id.
func statusID(id string) string { return id + "Status" }

// addStatusOperations adds the status resource of every async operation
// of annotated to spec, and asyncStatusSchema to its components. It
// refuses, at the annotation's status, a path the spec has a GET at, or
// an operationId it has already, and an async operation without an
// operationId, which names its status resource.
func addStatusOperations(spec *openapi3.T, annotated []annotation.Operation) error {
	var schema openapi3.Schema
	if err := json.Unmarshal([]byte(asyncStatusSchemaJSON), &schema); err != nil {
		return err
	}
	status := &openapi3.SchemaRef{Ref: "#/components/schemas/" + asyncStatusSchema, Value: &schema}
	var async []annotation.Operation
	for _, a := range annotated {
		if a.Mode == annotation.ModeAsync {
			async = append(async, a)
		}
	}
	if len(async) == 0 {
		return nil
	}
	ids := map[string]bool{}
	if spec.Paths != nil {
		for _, item := range spec.Paths.Map() {
			for _, op := range item.Operations() {
				ids[op.OperationID] = true
			}
		}
	}
	var errs []error
	refuse := func(pos annotation.Position, format string, args ...any) {
		errs = append(errs, &annotation.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
	}
	if spec.Components == nil {
		spec.Components = &openapi3.Components{}
	}
	if _, taken := spec.Components.Schemas[asyncStatusSchema]; taken {
		refuse(async[0].ModePos, "mode: async: the spec has a schema named %s already, which the status resources need; rename it", asyncStatusSchema)
	}
	for _, a := range async {
		id := statusOperationID(a)
		switch {
		case a.OperationID == "":
			refuse(a.ModePos, "mode: async on %s %s, which has no operationId; expected an operationId, which names the status operation (its name followed by Status)", a.Method, a.Path)
			continue
		case ids[id]:
			refuse(a.StatusPos, "x-idempotent.status: the operationId %s, which the status operation of %s takes, is taken by another operation; rename that one", id, a.OperationID)
			continue
		}
		if item := spec.Paths.Value(a.Status); item != nil && item.Get != nil {
			refuse(a.StatusPos, "x-idempotent.status: %s has a GET in the spec already; expected a path of its own for the status resource of %s", a.Status, a.OperationID)
			continue
		}
		post := spec.Paths.Value(a.Path).GetOperation(a.Method)
		op := statusOperation(a, post, status)
		ids[id] = true
		item := spec.Paths.Value(a.Status)
		if item == nil {
			item = &openapi3.PathItem{}
			spec.Paths.Set(a.Status, item)
		}
		item.Get = op
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if spec.Components.Schemas == nil {
		spec.Components.Schemas = openapi3.Schemas{}
	}
	spec.Components.Schemas[asyncStatusSchema] = openapi3.NewSchemaRef("", status.Value)
	return nil
}

// statusOperation is the GET of the status resource of async operation
// a, whose own operation is post: it takes the key in its path and the
// scope header post declares, and has post's security.
func statusOperation(a annotation.Operation, post *openapi3.Operation, status *openapi3.SchemaRef) *openapi3.Operation {
	op := &openapi3.Operation{
		OperationID: statusOperationID(a),
		Summary:     fmt.Sprintf("The status of an accepted %s request", a.OperationID),
		Description: fmt.Sprintf("Where a %s request accepted with 202 reports how it is doing, by its key, in the request's scope: its state while it is pending or running (with Retry-After), and its stored response once it is done.", a.OperationID),
		Parameters: openapi3.Parameters{{Value: &openapi3.Parameter{
			Name: "key", In: openapi3.ParameterInPath, Required: true,
			Description: "The key the request was accepted with.",
			Schema:      openapi3.NewStringSchema().NewRef(),
		}}},
		Responses: openapi3.NewResponses(),
	}
	if post != nil {
		op.Security = post.Security
		if h := a.Scope.Header; h != "" {
			for _, p := range post.Parameters {
				if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && strings.EqualFold(p.Value.Name, h) {
					op.Parameters = append(op.Parameters, p)
				}
			}
		}
	}
	desc := "The request's state, and its stored response once it is done."
	op.Responses.Set(fmt.Sprint(http.StatusOK), &openapi3.ResponseRef{Value: &openapi3.Response{
		Description: &desc,
		Content:     openapi3.NewContentWithJSONSchemaRef(status),
	}})
	return op
}

// augmentAsync documents async operation op, whose node is post, in the
// augmented spec: its 202 answer, and the GET of its status resource,
// added to paths.
func augmentAsync(paths, post *yaml.Node, op operation) {
	responses := get(post, "responses") // never a 202: annotate refuses one
	set(responses, "202", mapping(
		"description", str("Accepted: the request is stored and runs on a worker. Poll the status resource at Location; a retry with the same key and request gets this answer again while it runs, and the stored response once it is done."),
		"headers", mapping(
			"Location", mapping("description", str("The request's status resource."), "required", boolean(true), "schema", mapping("type", str("string"))),
			"Retry-After", ref("#/components/headers/"+retryHeader),
		),
		"content", mapping("application/json", mapping("schema", ref("#/components/schemas/"+asyncStatusSchema))),
	))
	item := get(paths, op.StatusPath)
	if item == nil {
		item = &yaml.Node{Kind: yaml.MappingNode}
		set(paths, op.StatusPath, item)
	}
	params := seq(mapping(
		"name", str("key"), "in", str("path"), "required", boolean(true),
		"description", str("The key the request was accepted with."),
		"schema", mapping("type", str("string"), "minLength", num(1), "maxLength", num(idem.MaxKeyLen)),
	))
	if op.ScopeHeader != "" {
		params.Content = append(params.Content, mapping(
			"name", str(op.ScopeHeader), "in", str("header"), "required", boolean(true),
			"description", str("The scope the request was accepted in: another scope has no such request."),
			"schema", mapping("type", str("string")),
		))
	}
	get200 := mapping(
		"description", str("The request's state, with Retry-After while it is pending or running, and its stored response once it is done."),
		"headers", mapping("Retry-After", ref("#/components/headers/"+retryHeader)),
		"content", mapping("application/json", mapping("schema", ref("#/components/schemas/"+asyncStatusSchema))),
	)
	getOp := mapping(
		"operationId", str(statusID(op.Name)),
		"summary", str(fmt.Sprintf("The status of an accepted %s request", op.Name)),
		"description", str(fmt.Sprintf("Where a %s request accepted with 202 reports how it is doing, by its key, in the request's scope. It needs no Idempotency-Key.", op.Name)),
		"parameters", params,
		"responses", mapping(
			"200", get200,
			"400", ref("#/components/responses/"+invalidResponse),
			"404", ref("#/components/responses/"+notFound),
			"503", ref("#/components/responses/"+storeResponse),
		),
	)
	if sec := get(post, "security"); sec != nil {
		set(getOp, "security", copyNode(sec))
	}
	// The status resource is behind the same middlewares as the
	// operation: it answers their refusals too.
	for _, code := range []string{"401", "403"} {
		if r := get(responses, code); r != nil {
			set(get(getOp, "responses"), code, copyNode(r))
		}
	}
	set(item, "get", getOp)
}

// addAsyncComponents adds the status resources' schema and 404 answer.
func addAsyncComponents(root *yaml.Node, file string, shape *Errors) error {
	var schema yaml.Node
	if err := yaml.Unmarshal([]byte(asyncStatusSchemaJSON), &schema); err != nil {
		return err
	}
	mt, problem := layerContent(shape)
	components := get(root, "components")
	for _, add := range []struct {
		section, name string
		node          *yaml.Node
	}{
		{"schemas", asyncStatusSchema, styled(schema.Content[0])},
		{"responses", notFound, mapping(
			"description", str(fmt.Sprintf("No such request (%s): no request was accepted with this key in this scope, or its result has expired.", idem.TypeAsyncNotFound)),
			"content", mapping(mt, mapping("schema", problem)),
		)},
	} {
		sec := get(components, add.section)
		if sec == nil {
			sec = &yaml.Node{Kind: yaml.MappingNode}
			set(components, add.section, sec)
		}
		if get(sec, add.name) != nil {
			return fmt.Errorf("%s: components.%s.%s exists already; the augmented spec adds its own there, so rename yours", file, add.section, add.name)
		}
		set(sec, add.name, add.node)
	}
	return nil
}

// styled is n, parsed from JSON, in block style, as the augmented spec's
// other additions are written.
func styled(n *yaml.Node) *yaml.Node {
	n.Style = 0
	for _, c := range n.Content {
		styled(c)
	}
	return n
}
