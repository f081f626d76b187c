package generator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/idem"
)

// augmented returns the augmented spec the result holds at path.
func augmented(t *testing.T, res *generator.Result, path string) []byte {
	t.Helper()
	for _, f := range res.Files {
		if f.Path == path {
			return f.Content
		}
	}
	t.Fatalf("no augmented spec at %s among the generated files", path)
	return nil
}

// compileClient generates oapi-codegen's client from spec into a package
// of the module and type-checks and vets it.
func compileClient(t *testing.T, spec []byte) {
	t.Helper()
	code, err := generator.ClientCode(spec, "client")
	if err != nil {
		t.Fatalf("client from the augmented spec: %v", err)
	}
	dir, err := os.MkdirTemp("testdata", "compile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeFile(t, filepath.Join(dir, "client.gen.go"), code)
	vetGo(t, "./"+filepath.ToSlash(dir), " (the client of the augmented spec)")
}

// The example's augmented spec documents the protocol on its annotated
// operations, and only there, validates, and gives a client that compiles.
func TestAugmentedSpec(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, filepath.Join("..", "example", "idemgen.yaml"))
	if cfg.Output.Spec == "" {
		t.Fatal("the example's config writes no augmented spec")
	}
	src := augmented(t, generate(t, cfg), cfg.Output.Spec)
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		t.Fatal(err)
	}
	create := doc.Paths.Find("/orders").Post
	var key *openapi3.Parameter
	for _, p := range create.Parameters {
		if p.Value != nil && p.Value.Name == idem.HeaderKey {
			if key != nil {
				t.Fatal("createOrder declares Idempotency-Key twice")
			}
			key = p.Value
		}
	}
	if key == nil || key.In != "header" || !key.Required || key.Schema.Value.MaxLength == nil || *key.Schema.Value.MaxLength != idem.MaxKeyLen || !strings.Contains(key.Description, "kept 24h") {
		t.Fatalf("createOrder's Idempotency-Key parameter: %+v", key)
	}
	for status, wantRetryAfter := range map[int]bool{409: true, 422: false, 503: true} {
		r := create.Responses.Status(status)
		if r == nil || r.Value == nil || r.Value.Content.Get(idem.ContentTypeProblem) == nil {
			t.Fatalf("createOrder has no %d problem response", status)
		}
		if _, ok := r.Value.Headers["Retry-After"]; ok != wantRetryAfter {
			t.Errorf("%d declares Retry-After: %v, want %v", status, ok, wantRetryAfter)
		}
	}
	if r := create.Responses.Status(201); r == nil || r.Value.Headers[idem.HeaderReplayed] == nil || r.Value.Headers["Location"] == nil {
		t.Error("createOrder's 201 does not declare both Location and Idempotent-Replayed")
	}
	if d := create.Responses.Status(400).Value.Description; d == nil || !strings.Contains(*d, "non-positive amount") {
		t.Error("createOrder's own 400 was replaced")
	}
	for _, p := range doc.Paths.Find("/orders").Get.Parameters {
		if p.Value.Name == idem.HeaderKey {
			t.Error("listOrders, not annotated, got an Idempotency-Key parameter")
		}
	}
	if doc.Components.Schemas["NewOrder"] == nil || doc.Components.Schemas["IdempotencyProblem"] == nil {
		t.Error("components lost a schema or lack the problem schema")
	}
	compileClient(t, src)

	// A spec that declares its own key keeps it, once.
	cfg = loadConfig(t, filepath.Join("testdata", "declaredkey", "idemgen.yaml"))
	cfg.Output.Spec = "gen/openapi.yaml"
	src = augmented(t, generate(t, cfg), cfg.Output.Spec)
	if n := strings.Count(string(src), "name: Idempotency-Key"); n != 1 {
		t.Errorf("the declared key appears %d times in the augmented spec, want once", n)
	}
}

// A JSON spec gets a JSON copy, which loads, with the protocol added.
func TestAugmentedSpecJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.json")
	writeFile(t, spec, []byte(`{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/things": {
      "post": {
        "operationId": "createThing",
        "x-idempotent": {"scope": "none"},
        "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"type": "object", "properties": {"n": {"type": "number", "example": 1.5e3}}}}}}}
      }
    }
  }
}
`))
	cfg := configFor(t, dir, spec, "")
	cfg.Output.Spec = "gen/openapi.json"
	src := augmented(t, generate(t, cfg), cfg.Output.Spec)
	if !strings.HasPrefix(string(src), "{\n") || !strings.Contains(string(src), `"example": 1.5e3`) {
		t.Fatalf("not JSON in the input's spelling:\n%s", src)
	}
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		t.Fatal(err)
	}
	if r := doc.Paths.Find("/things").Post.Responses.Status(409); r == nil {
		t.Fatalf("no 409 in the JSON copy:\n%s", src)
	}
	compileClient(t, src)
}

// Where an annotated operation declares an answer of its own for a status
// the layer answers too, the augmented spec keeps it and adds the layer's:
// as a second media type, or, where the media type is the layer's own, a
// oneOf of both schemas; a shared response is copied, not changed for the
// operations that share it. The client generated from it decodes both.
func TestAugmentedSpecKeepsOwnAnswers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, []byte(`openapi: 3.0.3
info:
  title: own answers
  version: "1"
paths:
  /charges:
    post:
      operationId: createCharge
      x-idempotent: true
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                amount:
                  type: integer
      responses:
        "201":
          description: created
        "400":
          description: The API's own refusal.
          content:
            application/json:
              schema:
                $ref: "#/components/schemas/Error"
        "409":
          $ref: "#/components/responses/Conflict"
        "422":
          description: The API's own problem.
          content:
            application/problem+json:
              schema:
                $ref: "#/components/schemas/Error"
    get:
      operationId: listCharges
      responses:
        "200":
          description: ok
        "409":
          $ref: "#/components/responses/Conflict"
components:
  responses:
    Conflict:
      description: The API's own conflict.
      content:
        application/json:
          schema:
            $ref: "#/components/schemas/Error"
  schemas:
    Error:
      type: object
      properties:
        message:
          type: string
`))
	cfg := configFor(t, dir, spec, "")
	cfg.Output.Spec = "gen/openapi.yaml"
	src := augmented(t, generate(t, cfg), cfg.Output.Spec)
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		t.Fatal(err)
	}
	create := doc.Paths.Find("/charges").Post
	media := func(status int, mt string) *openapi3.MediaType {
		t.Helper()
		r := create.Responses.Status(status)
		if r == nil || r.Value == nil {
			t.Fatalf("createCharge has no %d", status)
		}
		return r.Value.Content.Get(mt)
	}
	for _, status := range []int{400, 409} {
		own, layer := media(status, "application/json"), media(status, idem.ContentTypeProblem)
		if own == nil || own.Schema.Ref != "#/components/schemas/Error" {
			t.Errorf("%d: the operation's own application/json answer is gone", status)
		}
		if layer == nil || layer.Schema.Ref != "#/components/schemas/IdempotencyProblem" {
			t.Errorf("%d: the layer's problem+json answer is not added", status)
		}
		d := create.Responses.Status(status).Value.Description
		if d == nil || !strings.HasPrefix(*d, "The API's own") || !strings.Contains(*d, "The idempotency layer also answers") {
			t.Errorf("%d: description %q does not say when each is sent", status, *d)
		}
	}
	if _, ok := create.Responses.Status(409).Value.Headers["Retry-After"]; !ok {
		t.Error("409: the layer's Retry-After is not declared")
	}
	one := media(422, idem.ContentTypeProblem)
	if one == nil || len(one.Schema.Value.OneOf) != 2 || one.Schema.Value.OneOf[0].Ref != "#/components/schemas/Error" || one.Schema.Value.OneOf[1].Ref != "#/components/schemas/IdempotencyProblem" {
		t.Errorf("422: want a oneOf of the operation's schema and the layer's, got %+v", one)
	}
	for _, status := range []int{413, 415, 500, 503} {
		if media(status, idem.ContentTypeProblem) == nil {
			t.Errorf("%d: the layer's answer is not documented", status)
		}
	}
	// The shared response, and the operation that is not annotated, are
	// as they were.
	if c := doc.Components.Responses["Conflict"].Value; c.Content.Get(idem.ContentTypeProblem) != nil || strings.Contains(*c.Description, "idempotency") {
		t.Error("the shared Conflict response was changed")
	}
	if r := doc.Paths.Find("/charges").Get.Responses.Status(409); r.Ref != "#/components/responses/Conflict" {
		t.Errorf("listCharges' 409 is %q, want the shared response", r.Ref)
	}
	code, err := generator.ClientCode(src, "client")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"JSON400 *Error", "ApplicationproblemJSON400 *IdempotencyProblem", "JSON409 *Error", "ApplicationproblemJSON409 *IdempotencyProblem"} {
		if !strings.Contains(strings.Join(strings.Fields(string(code)), " "), field) {
			t.Errorf("the client's response has no field %s: it would not decode both answers", field)
		}
	}
	compileClient(t, src)
}
