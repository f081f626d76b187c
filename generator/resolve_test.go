package generator_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResolvedSpecs generates the test specs under testdata/resolve, for
// each of which oapi-codegen alone writes code that does not compile.
// idemgen resolves the cause in the loaded document, says so in one
// warning per cause, and the output compiles and is the same on every run.
func TestResolvedSpecs(t *testing.T) {
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
