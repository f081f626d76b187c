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
// of the module and builds and vets it.
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
	pkg := "./" + filepath.ToSlash(dir)
	for _, args := range [][]string{{"build", pkg}, {"vet", pkg}} {
		if out, err := runGo(t, args...); err != nil {
			t.Fatalf("go %s (the client of the augmented spec): %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The example's augmented spec documents the protocol on its annotated
// operations, and only there, validates, and gives a client that compiles.
func TestAugmentedSpec(t *testing.T) {
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
