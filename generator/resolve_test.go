package generator_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestResolvedSpecs generates the test specs under testdata/resolve, for
// each of which oapi-codegen alone writes code that does not compile.
// idemgen resolves the cause in the loaded document, says so in one
// warning per cause, and the output compiles and is the same on every run.
// The augmented spec carries the resolutions, and resolves what else
// keeps oapi-codegen's client of it from compiling (one warning each), so
// that client compiles too.
func TestResolvedSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec     string
		warnings []string // after the spec's path
	}{
		{
			spec: "enum-constants.yaml",
			warnings: []string{
				":33:9: warning: oapi-codegen names a constant of enum SourceType (Source.Type) like another declaration; renamed it with x-enum-varnames, its value unchanged: SourceTypeBank is SourceTypeBankValue",
			},
		},
		{
			spec: "array-items.yaml",
			warnings: []string{
				":23:23: warning: oapi-codegen gives the items of the array at UpdatePortalJSONBody.AllowedUpdates.0 the array's own type name, UpdatePortalJSONBodyAllowedUpdates0; named their type UpdatePortalJSONBodyAllowedUpdates0Item with x-go-type-name, which changes no JSON",
			},
		},
		{
			spec: "response-object.yaml",
			warnings: []string{
				":12:5: warning: oapi-codegen names the client's response type of DELETE /assistants/{id} like another declaration; generated with oapi-codegen.output-options.resolve-type-name-collisions: true, which names it DeleteAssistantResponse2",
				":49:5: warning: the augmented spec, for oapi-codegen's client of it: oapi-codegen names the client's response type of DELETE /assistants/{id} like the type of schema DeleteAssistantResponse; " +
					"named the schema's type DeleteAssistantResponseBody with x-go-name, which changes no JSON (a client generated with output-options.resolve-type-name-collisions: true names the client's response types apart instead)",
				":57:9: warning: oapi-codegen names the type of the enum at DeleteAssistantResponse.Object DeleteAssistantResponseObject, like a type of the strict server; named it DeleteAssistantResponseObjectEnum with x-go-type-name, which changes no JSON",
			},
		},
		{
			spec: "typeless-response.yaml",
			warnings: []string{
				":26:13: warning: the 201 response of POST /versions (application/json) has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue, which holds any JSON value: return CreateVersion201JSONResponse(idem.JSONOf(v))",
				":36:13: warning: the 200 response of GET /versions (application/json) has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue, which holds any JSON value: return ListVersions200JSONResponse(idem.JSONOf(v))",
			},
		},
		{
			spec: "webhook-schema.yaml",
			warnings: []string{
				":38:5: warning: oapi-codegen prunes the schemas no path uses, yet the webhooks' types name schema Pet; generated with oapi-codegen.output-options.skip-prune: true, which keeps every schema (set it in the config to say so)",
				":38:5: warning: the augmented spec, for oapi-codegen's client of it: oapi-codegen leaves the schemas no path uses out of a client's models, yet the webhooks' types name schema Pet; " +
					"kept it with components.schemas.IdemgenKeptSchemas, which refers to it and to itself (a client generated with output-options.skip-prune: true does not need it)",
			},
		},
		{
			spec: "webhook-parameter.yaml",
			warnings: []string{
				":27:5: warning: oapi-codegen prunes the schemas no path uses, yet the webhooks' types name schema Kind; generated with oapi-codegen.output-options.skip-prune: true, which keeps every schema (set it in the config to say so)",
				":27:5: warning: the augmented spec, for oapi-codegen's client of it: oapi-codegen leaves the schemas no path uses out of a client's models, yet the webhooks' types name schema Kind; " +
					"kept it with components.schemas.IdemgenKeptSchemas, which refers to it and to itself (a client generated with output-options.skip-prune: true does not need it)",
			},
		},
		{
			// Only the 202 is an interface; the webhook's response names a
			// pruned schema in no type of the output.
			spec: "prune-and-typeless-edges.yaml",
			warnings: []string{
				":26:13: warning: the 202 response of GET /things (application/json) has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue, which holds any JSON value: return ListThings202JSONResponse(idem.JSONOf(v))",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel() // Generate serialises oapi-codegen itself
			spec, err := filepath.Abs(filepath.Join("testdata", "resolve", tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			cfg := configFor(t, t.TempDir(), spec, "client: true\n")
			cfg.Output.Spec = "gen/openapi.yaml"
			res := generate(t, cfg)
			var want []string
			for _, w := range tt.warnings {
				want = append(want, spec+w)
			}
			if !slices.Equal(res.Warnings, want) {
				t.Errorf("warnings\n%q\nwant\n%q", res.Warnings, want)
			}
			again := generate(t, cfg)
			if len(again.Files) != len(res.Files) {
				t.Fatalf("%d files, then %d", len(res.Files), len(again.Files))
			}
			for i, f := range res.Files {
				if again.Files[i].Path != f.Path || !bytes.Equal(again.Files[i].Content, f.Content) {
					t.Errorf("%s differs from one run to the next", f.Path)
				}
			}
			compileGo(t, res)
			compileClient(t, augmented(t, res, cfg.Output.Spec))
		})
	}
}

// TestResolutionsDoNotOverride checks that a spec's own naming is kept:
// an enum that names its constants with x-enum-varnames is not renamed,
// and what then does not compile is refused as before.
func TestResolutionsDoNotOverride(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("testdata", "resolve", "enum-constants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	writeFile(t, spec, bytes.Replace(src, []byte("enum: [bank, card, wallet]"), []byte("enum: [bank, card, wallet]\n          x-enum-varnames: [bank, card, wallet]"), 1))
	_, err = generateNoPanic(t, configFor(t, dir, spec, ""))
	if err == nil || !strings.Contains(err.Error(), "SourceTypeBank is declared twice by oapi-codegen") {
		t.Fatalf("Generate: %v; want the duplicate the spec's own names make refused", err)
	}
}

// TestAugmentedSpecCarriesResolutionsJSON: the augmented spec of a JSON
// spec carries the resolutions too, though the loader records no place
// in a JSON document: the carried extension is in the copy, no second
// resolution of the client's is needed, its client compiles, and the
// warning names the place in the JSON file.
func TestAugmentedSpecCarriesResolutionsJSON(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("testdata", "resolve", "enum-constants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	asJSON, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.json")
	writeFile(t, spec, asJSON)
	cfg := configFor(t, dir, spec, "")
	cfg.Output.Spec = "gen/openapi.json"
	res := generate(t, cfg)
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(spec) + `:\d+:\d+: warning: oapi-codegen names a constant of enum SourceType \(Source.Type\) like another declaration; renamed it with x-enum-varnames, its value unchanged: SourceTypeBank is SourceTypeBankValue$`)
	if len(res.Warnings) != 1 || !want.MatchString(res.Warnings[0]) {
		t.Errorf("warnings %q, want one matching %s", res.Warnings, want)
	}
	out := augmented(t, res, cfg.Output.Spec)
	if !bytes.Contains(out, []byte(`"x-enum-varnames": [`)) || !bytes.Contains(out, []byte(`"SourceTypeBankValue"`)) {
		t.Errorf("the augmented spec does not carry x-enum-varnames:\n%s", out)
	}
	compileClient(t, out)
}
