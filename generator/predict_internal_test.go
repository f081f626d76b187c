package generator

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/internal/realspecs"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
	"gopkg.in/yaml.v3"
)

// aheadSpecs are the specs the prediction is checked on: the test specs
// of the resolutions and of the generator, and, with IDEMGEN_SPECS, the
// corpus. Stripe's comes only with IDEMGEN_SPECS_LONG=1: its comparisons
// run oapi-codegen in full several times.
func aheadSpecs(t *testing.T) []string {
	t.Helper()
	specs, err := filepath.Glob(filepath.Join("testdata", "resolve", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("testdata", "*", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, more...)
	specs = append(specs, filepath.Join("..", "example", "openapi.yaml"))
	if os.Getenv(realspecs.EnvVar) == "" {
		t.Logf("%s is not set: the corpus is left out", realspecs.EnvVar)
		return specs
	}
	dir := realspecs.Dir(t)
	for _, pattern := range []string{"*.yaml", "*.json"} {
		corpus, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range corpus {
			if filepath.Base(spec) == "stripe-openapi__spec3-2023-09.yaml" && os.Getenv("IDEMGEN_SPECS_LONG") != "1" {
				continue
			}
			specs = append(specs, spec)
		}
	}
	return specs
}

// specName names spec in a test's name: its path under testdata, or its
// file name.
func specName(spec string) string {
	if rest, ok := strings.CutPrefix(filepath.ToSlash(spec), "testdata/"); ok {
		return rest
	}
	return filepath.Base(spec)
}

// loadForTest loads spec as runOapiCodegen does, with the discriminated
// unions hoisted as generateResolved hoists them.
func loadForTest(t *testing.T, spec string) *openapi3.T {
	t.Helper()
	doc, err := util.LoadSwaggerWithOverlay(spec, util.LoadSwaggerWithOverlayOpts{AllowRemoteRefsFrom: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	hoistDiscriminated(doc)
	return doc
}

// serverConf is oapi-codegen's configuration for idemgen's server
// output (runOapiCodegen), with or without the client.
func serverConf(client bool) codegen.Configuration {
	return codegen.Configuration{
		PackageName: "gen",
		Generate:    codegen.GenerateOptions{StdHTTPServer: true, Client: client, Strict: true, Models: true},
	}
}

// TestPredictedNames checks the prediction of the names oapi-codegen's
// output declares against the output, on every spec, whether or not it
// needs a resolution: the models' declarations as modelDecls names them
// and the output without models, in order, are the output's.
func TestPredictedNames(t *testing.T) {
	t.Parallel()
	for _, spec := range aheadSpecs(t) {
		for _, client := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/client=%v", specName(spec), client), func(t *testing.T) {
				if client {
					largeSpecsLong(t, spec)
				}
				conf := serverConf(client)
				doc := loadForTest(t, spec)
				oapiCodegen.mu.Lock()
				defer oapiCodegen.mu.Unlock()
				none := conf
				none.Generate = codegen.GenerateOptions{}
				if _, err := codegen.Generate(doc, none); err != nil {
					t.Skipf("oapi-codegen refuses the spec: %v", err)
				}
				ts, err := collectTypes(doc, conf)
				if err != nil {
					t.Fatal(err)
				}
				models, ok := ts.modelDecls(conf)
				if !ok {
					t.Fatal("the models' declarations cannot be told")
				}
				rest := conf
				rest.Generate.Models = false
				rest.OutputOptions.SkipFmt = true
				code, err := codegen.Generate(doc, rest)
				if err != nil {
					t.Fatal(err)
				}
				restScan, err := scanNames("oapi.gen.go", []byte(code))
				if err != nil {
					t.Fatal(err)
				}
				predicted := newNameScan(slices.Concat(models, restScan.list), restScan.methods)
				if code, err = codegen.Generate(doc, conf); err != nil {
					t.Fatal(err)
				}
				scan, err := scanNames("oapi.gen.go", []byte(code))
				if err != nil {
					t.Fatal(err)
				}
				strip := func(list []nameDecl) []nameDecl {
					out := make([]nameDecl, len(list))
					for i, d := range list {
						d.pos = 0
						out[i] = d
					}
					return out
				}
				got, want := strip(predicted.list), strip(scan.list)
				if i := firstDifference(got, want); i >= 0 {
					t.Fatalf("%d declarations predicted, %d in the output; the first that differs, #%d: predicted %+v, output %+v", len(got), len(want), i, at(got, i), at(want, i))
				}
				// Resolving acts on the strict server's Visit methods on
				// interfaces alone; the models' methods are not predicted.
				visits := func(methods []interfaceMethod) []interfaceMethod {
					return slices.DeleteFunc(slices.Clone(methods), func(m interfaceMethod) bool { return !strings.HasPrefix(m.method, "Visit") })
				}
				if got, want := visits(predicted.interfaceMethods), visits(scan.interfaceMethods); !slices.Equal(got, want) {
					t.Errorf("Visit methods on interfaces predicted %v, in the output %v", got, want)
				}
			})
		}
	}
}

func firstDifference(a, b []nameDecl) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(list []nameDecl, i int) any {
	if i < len(list) {
		return list[i]
	}
	return "none"
}

// TestResolveAhead checks that resolving ahead of oapi-codegen's output
// makes what resolving after it makes, output, resolutions and what the
// augmented spec carries alike, and that it does make it for each kind
// of resolution it covers: all but the client's response types, which
// an option of oapi-codegen's resolves.
func TestResolveAhead(t *testing.T) {
	t.Parallel()
	// The specs resolved ahead; false for those resolved ahead without
	// the client only, whose client's response types are named like
	// other types.
	ahead := map[string]bool{
		"enum-constants.yaml":                                 true,
		"array-items.yaml":                                    true,
		"response-object.yaml":                                false,
		"typeless-response.yaml":                              true,
		"webhook-schema.yaml":                                 true,
		"webhook-parameter.yaml":                              true,
		"prune-and-typeless-edges.yaml":                       true,
		"OAI-OpenAPI-Specification__webhook-example-3.1.yaml": true,
		"OAI-OpenAPI-Specification__api-with-examples.yaml":   true,
		"openai-openapi__openapi-2023-11-3.0.yaml":            false,
		"stripe-openapi__spec3-2023-09.yaml":                  true,
	}
	// With resolve-type-name-collisions, oapi-codegen names types apart
	// from the client's, which nothing predicts: resolving is after the
	// output.
	collisions := serverConf(true)
	collisions.OutputOptions.ResolveTypeNameCollisions = true
	// Echo's server keys its middlewares by the operationIds oapi-codegen
	// sees, which an earlier run rewrites in the document.
	echo := serverConf(false)
	echo.Generate.StdHTTPServer, echo.Generate.EchoServer = false, true
	confs := []struct {
		name  string
		conf  codegen.Configuration
		ahead func(always bool) bool
	}{
		{"server", serverConf(false), func(bool) bool { return true }},
		{"client", serverConf(true), func(always bool) bool { return always }},
		{"resolve-type-name-collisions", collisions, func(bool) bool { return false }},
		{"echo", echo, func(bool) bool { return true }},
	}
	for _, spec := range aheadSpecs(t) {
		// The last two configurations differ from the first two only in
		// how what is resolved is named, so a spec that neither the
		// server nor the client needs resolved is left out of them.
		resolves := false
		for _, c := range confs {
			if c.name != "server" && c.name != "client" && !resolves {
				continue
			}
			t.Run(specName(spec)+"/"+c.name, func(t *testing.T) {
				if c.name != "server" {
					largeSpecsLong(t, spec)
				}
				run := func(ahead bool) (resolved, error) {
					load := func() (*openapi3.T, error) {
						return util.LoadSwaggerWithOverlay(spec, util.LoadSwaggerWithOverlayOpts{AllowRemoteRefsFrom: []string{}})
					}
					doc, err := load()
					if err != nil {
						t.Fatal(err)
					}
					oapiCodegen.mu.Lock()
					defer oapiCodegen.mu.Unlock()
					mode := resolveMode{tree: sync.OnceValue(func() *yaml.Node { return specTreeOf(t, spec) }), ahead: ahead}
					return generateResolved(spec, doc, load, c.conf, mode)
				}
				got, gotErr := run(true)
				want, wantErr := run(false)
				resolves = resolves || len(want.found) > 0 || wantErr != nil
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("error %v, resolving after the output %v", gotErr, wantErr)
				}
				if got.code != want.code {
					t.Error("the output differs from the output resolved after it")
				}
				if !reflect.DeepEqual(got.found, want.found) {
					t.Errorf("resolutions %+v, resolving after the output %+v", got.found, want.found)
				}
				if !reflect.DeepEqual(got.carry.extensions, want.carry.extensions) || !reflect.DeepEqual(got.carry.keep, want.carry.keep) {
					t.Errorf("carried %+v, resolving after the output %+v", got.carry, want.carry)
				}
				always, listed := ahead[filepath.Base(spec)]
				wantAhead := listed && c.ahead(always)
				if got.ahead != wantAhead && gotErr == nil {
					t.Errorf("resolved ahead: %v, want %v", got.ahead, wantAhead)
				}
			})
		}
	}
}

// largeSpecsLong skips the test for a spec over 256 KiB unless
// IDEMGEN_SPECS_LONG=1 (as CI sets). On those each comparison costs
// seconds, and the test command checks them in one configuration only:
// the server's, which every spec's generation uses.
func largeSpecsLong(t *testing.T, spec string) {
	t.Helper()
	if os.Getenv("IDEMGEN_SPECS_LONG") == "1" {
		return
	}
	fi, err := os.Stat(spec)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 256<<10 {
		t.Skip("a spec over 256 KiB: in this configuration with IDEMGEN_SPECS_LONG=1 only")
	}
}

// specTreeOf is specTree of the spec file at path.
func specTreeOf(t *testing.T, path string) *yaml.Node {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return specTree(path, src)
}

// TestPrepare checks what resolving ahead relies on in oapi-codegen:
// that codegen.Generate sets its state and prunes the document before it
// compiles the streaming-content-types patterns (prepare), so that the
// state is there, the schemas no path uses are gone, and the options'
// own patterns are left as they were.
func TestPrepare(t *testing.T) {
	t.Parallel()
	doc := loadForTest(t, filepath.Join("testdata", "resolve", "webhook-schema.yaml"))
	conf := serverConf(false)
	conf.OutputOptions.StreamingContentTypes = []string{"application/x-ndjson"}
	oapiCodegen.mu.Lock()
	defer oapiCodegen.mu.Unlock()
	before := len(doc.Components.Schemas)
	if !prepare(doc, conf) {
		t.Fatal("prepare stopped on something else than its pattern: oapi-codegen's order has changed, and resolving ahead no longer applies")
	}
	if len(doc.Components.Schemas) >= before {
		t.Errorf("%d schemas after prepare, %d before: the document was not pruned", len(doc.Components.Schemas), before)
	}
	if got := conf.OutputOptions.StreamingContentTypes; len(got) != 1 {
		t.Errorf("the caller's patterns changed: %q", got)
	}
	defs, err := codegen.OperationDefinitions(doc)
	if err != nil || len(defs) == 0 {
		t.Fatalf("oapi-codegen's operations after prepare: %d, %v", len(defs), err)
	}
}
