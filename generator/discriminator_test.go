package generator_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestDiscriminatorOverInlineOneOf generates a spec of the shapes of
// OpenAI's current one: discriminators over a oneOf or an anyOf whose
// members are written inline, each with its own value (a const, an enum
// of one value, one of its allOf's), with and without a mapping.
// oapi-codegen refuses them; idemgen moves each inline member to
// components.schemas, with one warning per union at its place in the
// spec, and the augmented spec does the same, so that its client
// compiles. The JSON is unchanged: each value decodes to its member, and
// a member encodes as it did. A member without a value of its own is
// refused at its union's line, as a limit of oapi-codegen, with the
// workaround.
func TestDiscriminatorOverInlineOneOf(t *testing.T) {
	t.Parallel()
	spec, err := filepath.Abs(filepath.Join("testdata", "resolve", "discriminator-inline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := configFor(t, t.TempDir(), spec, "client: true\n")
	cfg.Output.Spec = "gen/openapi.yaml"
	res := generate(t, cfg)
	const moved = ": warning: oapi-codegen maps a discriminator's values only to members given by $ref, and "
	const mapped = " to components.schemas, referred to by $ref and named in discriminator.mapping by its value, which changes no JSON: "
	want := []string{
		spec + ":59:11" + moved + "2 members of this oneOf (discriminator type) are written inline; moved each" + mapped + "server_vad is TurnDetectionServerVad, semantic_vad is TurnDetectionSemanticVad",
		spec + ":82:5" + moved + "2 members of this anyOf (discriminator type) are written inline; moved each" + mapped + "delta is EventDelta, done is EventDone",
		spec + ":107:5" + moved + "a member of this oneOf (discriminator type) is written inline; moved it" + mapped + "web_search is ToolWebSearch",
	}
	if !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", res.Warnings, want)
	}

	// The augmented spec carries the moves.
	src := augmented(t, res, cfg.Output.Spec)
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		t.Fatal(err)
	}
	tool := doc.Components.Schemas["Tool"].Value
	if tool.OneOf[1].Ref != "#/components/schemas/ToolWebSearch" || tool.Discriminator.Mapping["web_search"].Ref != "#/components/schemas/ToolWebSearch" ||
		tool.Discriminator.Mapping["function"].Ref != "#/components/schemas/FunctionTool" {
		t.Errorf("Tool in the augmented spec: oneOf %v, mapping %v", tool.OneOf, tool.Discriminator.Mapping)
	}
	if s := doc.Components.Schemas["ToolWebSearch"]; s == nil || s.Value.Properties["max_results"] == nil {
		t.Error("the augmented spec has no schema ToolWebSearch with the member's properties")
	}
	if s := doc.Components.Schemas["EventDelta"]; s == nil || len(s.Value.AllOf) != 2 || s.Value.AllOf[0].Ref != "#/components/schemas/DeltaEvent" {
		t.Error("the augmented spec has no schema EventDelta with the member's allOf")
	}
	compileClient(t, src)

	goTest(t, writeGoPackage(t, res, map[string]string{"discriminator_run_test.go": discriminatorRunTest}))

	// A member whose value is not its own cannot be mapped without a
	// change to the JSON: refused at the union.
	text, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	refused := filepath.Join(dir, "openapi.yaml")
	writeFile(t, refused, bytes.Replace(text, []byte("              type: string\n              const: done\n"), []byte("              type: string\n"), 1))
	_, err = generateNoPanic(t, configFor(t, dir, refused, ""))
	wantErr := refused + ":82:5: oapi-codegen cannot generate this anyOf with a discriminator: its member 2, written inline, has no value of its own for the discriminator's property type (a const, or an enum of one value). " +
		"oapi-codegen maps discriminator values only to members given by $ref (a limit of oapi-codegen, not of the spec)"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) || !strings.Contains(err.Error(), "Move each member to components.schemas, refer to it by $ref and name its value in discriminator.mapping") {
		t.Fatalf("Generate: %v\nwant an error starting\n%s\nand saying what to do", err, wantErr)
	}

	// TurnDetection, an anyOf of the discriminated oneOf and null, gets
	// no JSON methods from oapi-codegen: an annotated operation whose body
	// holds it is refused at its annotation, since requests that differ
	// only in it would replay one answer.
	lossy := filepath.Join(dir, "lossy.yaml")
	writeFile(t, lossy, bytes.Replace(text, []byte("      operationId: putTurnDetection\n"), []byte("      operationId: putTurnDetection\n      x-idempotent: true\n"), 1))
	_, err = generateNoPanic(t, configFor(t, dir, lossy, ""))
	wantErr = lossy + ":35:7: x-idempotent on PUT /turn-detection: the request body holds TurnDetection, a union that oapi-codegen declares without JSON methods"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) || !strings.Contains(err.Error(), "refer to the inner discriminated union by $ref") {
		t.Fatalf("Generate: %v\nwant an error starting\n%s\nand saying what to do", err, wantErr)
	}
}

// discriminatorRunTest runs in the generated package: each discriminator
// value decodes to the member that has it, and a member encodes as the
// JSON it came from; over HTTP, the request is checked against the moved
// members' schemas, and the fingerprint tells their values apart.
const discriminatorRunTest = `package gen

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func TestDiscriminatedMembers(t *testing.T) {
	var s Session
	in := ` + "`" + `{"events":[{"type":"delta","delta":"a","stream_id":"s1"},{"type":"done"}],"tools":[{"type":"function","name":"f"},{"type":"web_search","max_results":3}]}` + "`" + `
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	events, tools := *s.Events, *s.Tools
	if v, err := events[0].ValueByDiscriminator(); err != nil || v.(EventDelta).Delta != "a" || *v.(EventDelta).StreamId != "s1" {
		t.Errorf("the delta event decodes to %#v (%v)", v, err)
	}
	if v, err := events[1].ValueByDiscriminator(); err != nil || v.(EventDone).Type != "done" {
		t.Errorf("the done event decodes to %#v (%v)", v, err)
	}
	if v, err := tools[0].ValueByDiscriminator(); err != nil || v.(FunctionTool).Name != "f" {
		t.Errorf("the function tool decodes to %#v (%v)", v, err)
	}
	if v, err := tools[1].ValueByDiscriminator(); err != nil || *v.(ToolWebSearch).MaxResults != 3 {
		t.Errorf("the web search tool decodes to %#v (%v)", v, err)
	}

	var done Event
	if err := done.FromEventDone(EventDone{Type: "done"}); err != nil {
		t.Fatal(err)
	}
	var search Tool
	if err := search.FromToolWebSearch(ToolWebSearch{Type: "web_search"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{{done, ` + "`" + `{"type":"done"}` + "`" + `}, {search, ` + "`" + `{"type":"web_search"}` + "`" + `}} {
		if out, err := json.Marshal(c.v); err != nil || string(out) != c.want {
			t.Errorf("%T encodes as %s (%v), want %s", c.v, out, err, c.want)
		}
	}
}

type sessions struct{ runs int }

func (s *sessions) CreateSession(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateSessionRequestObject) (CreateSessionResponseObject, error) {
	s.runs++
	return CreateSession201JSONResponse(*request.Body), nil
}

func (s *sessions) PutTurnDetection(ctx context.Context, request PutTurnDetectionRequestObject) (PutTurnDetectionResponseObject, error) {
	return PutTurnDetection204Response{}, nil
}

func TestDiscriminatedRequests(t *testing.T) {
	svc := &sessions{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(key, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/sessions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	body := ` + "`" + `{"events":[{"type":"delta","delta":"a"}],"tools":[{"type":"web_search","max_results":3}]}` + "`" + `
	if status, out := send("k1", body); status != 201 || !strings.Contains(out, ` + "`" + `"max_results":3` + "`" + `) {
		t.Fatalf("a session with a moved member: %d %s", status, out)
	}
	if status, out := send("k1", strings.Replace(body, ` + "`" + `"max_results":3` + "`" + `, ` + "`" + `"max_results":4` + "`" + `, 1)); status != 422 {
		t.Fatalf("another value of a moved member's field under the same key: %d %s, want 422", status, out)
	}
	if status, out := send("k2", strings.Replace(body, ` + "`" + `"max_results":3` + "`" + `, ` + "`" + `"max_results":"x"` + "`" + `, 1)); status != 400 || !strings.Contains(out, "max_results") {
		t.Fatalf("a moved member's field of the wrong type: %d %s, want a 400 naming it", status, out)
	}
	if svc.runs != 1 {
		t.Fatalf("the handler ran %d times, want once", svc.runs)
	}
}
`
