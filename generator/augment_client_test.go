package generator_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
	"gopkg.in/yaml.v3"
)

// TestAugmentedClientCompilesEverySpec generates every spec of the
// real-spec corpus with every POST, PUT, PATCH and DELETE operation
// annotated (but those the layer refuses) and an augmented spec, then
// generates oapi-codegen's client and models from the augmented spec
// with a plain configuration, as a client team would, and type-checks
// them. Where idemgen resolved a cause that keeps oapi-codegen's output
// from compiling, the augmented spec must carry the resolution, or the
// client team's build fails where idemgen's did not. The specs over 800
// KiB (Stripe's, Discord's, Xero's, Adyen's) run only with
// IDEMGEN_SPECS_LONG=1, as CI sets.
func TestAugmentedClientCompilesEverySpec(t *testing.T) {
	t.Parallel()
	specsDir := realspecs.Dir(t)
	exports := &exportData{files: map[string]string{}}
	for file := range indexedSpecs(t) {
		t.Run(strings.TrimSuffix(file, filepath.Ext(file)), func(t *testing.T) {
			t.Parallel() // Generate serialises oapi-codegen itself
			path := filepath.Join(specsDir, file)
			if os.Getenv(longSpecsEnv) != "1" {
				if file == stripeSpec {
					t.Skipf("generating Stripe's spec and its client takes minutes; set %s=1 to", longSpecsEnv)
				}
				if fi, err := os.Stat(path); err == nil && fi.Size() > 800<<10 {
					t.Skipf("a spec over 800 KiB: its client takes seconds to type-check; set %s=1 to", longSpecsEnv)
				}
			}
			spec, res := generateEveryMutating(t, path)
			start := time.Now()
			code, err := generator.ClientCode(augmented(t, res, "gen/"+filepath.Base(spec)), "client")
			if err != nil {
				t.Fatalf("oapi-codegen refuses the augmented spec: %v", err)
			}
			t.Logf("oapi-codegen's client of the augmented spec: %d bytes in %v", len(code), time.Since(start).Round(time.Millisecond))
			if errs := typeCheck(t, exports, code); len(errs) > 0 {
				t.Fatalf("oapi-codegen's client of the augmented spec does not compile (%d errors):\n%s", len(errs), strings.Join(errs[:min(len(errs), 20)], "\n"))
			}
		})
	}
}

// generateEveryMutating writes into a temporary directory a YAML copy of
// the spec at path with every POST, PUT, PATCH and DELETE operation
// annotated x-idempotent: true, and generates it with an augmented spec
// beside the output, leaving out the annotations the layer refuses. It
// returns the copy's path and the result. A spec that idemgen refuses
// for another reason is skipped, naming it.
func generateEveryMutating(t *testing.T, path string) (string, *generator.Result) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// JSON's flow style would make lines of a megabyte.
	var block func(n *yaml.Node)
	block = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			n.Style = 0
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&doc)
	spec := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".yaml")
	refused := map[string]bool{}
	for range 4 {
		n := annotateEveryMutating(&doc, refused)
		out, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, spec, out)
		cfg := configFor(t, dir, spec, "")
		cfg.Output.Spec = "gen/" + filepath.Base(spec)
		start := time.Now()
		res, err := generateNoPanic(t, cfg)
		t.Logf("Generate with %d operations annotated: %v", n, time.Since(start).Round(time.Millisecond))
		if err == nil {
			return spec, res
		}
		if strings.Contains(err.Error(), "a generator bug") {
			t.Fatalf("Generate refused its own output: %v", err)
		}
		ops := refusedOperations(err)
		if ops == nil {
			t.Skipf("idemgen does not build this spec: %.300s", err)
		}
		for _, op := range ops {
			refused[op] = true
		}
	}
	t.Fatal("Generate still refuses annotations after four rounds")
	return "", nil
}

// annotateEveryMutating sets x-idempotent: true on every POST, PUT, PATCH
// and DELETE operation of doc, and removes it from those refused holds,
// by "METHOD path". It returns how many it annotated.
func annotateEveryMutating(doc *yaml.Node, refused map[string]bool) int {
	n := 0
	paths := yamlField(doc.Content[0], "paths")
	for i := 0; paths != nil && i+1 < len(paths.Content); i += 2 {
		route, item := paths.Content[i].Value, paths.Content[i+1]
		for j := 0; item.Kind == yaml.MappingNode && j+1 < len(item.Content); j += 2 {
			method, op := item.Content[j].Value, item.Content[j+1]
			switch method {
			case "post", "put", "patch", "delete":
			default:
				continue
			}
			if op.Kind != yaml.MappingNode {
				continue
			}
			var kept []*yaml.Node
			for k := 0; k+1 < len(op.Content); k += 2 {
				if op.Content[k].Value != "x-idempotent" {
					kept = append(kept, op.Content[k], op.Content[k+1])
				}
			}
			op.Content = kept
			if refused[strings.ToUpper(method)+" "+route] {
				continue
			}
			op.Content = append([]*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "x-idempotent"},
				{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
			}, op.Content...)
			n++
		}
	}
	return n
}

// typeCheck type-checks code as a package of its own and returns its
// errors.
func typeCheck(t *testing.T, exports *exportData, code []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "client.gen.go", code, 0)
	if err != nil {
		t.Fatalf("the client does not parse: %v", err)
	}
	imports := map[string]bool{}
	for _, i := range file.Imports {
		p, _ := strconv.Unquote(i.Path.Value)
		imports[p] = true
	}
	var errs []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", exports.lookup(t, imports)),
		// Every error, soft ones (unused imports and variables) too:
		// the compiler refuses those as well.
		Error: func(err error) { errs = append(errs, err.Error()) },
	}
	_, _ = conf.Check("client", fset, []*ast.File{file}, nil) // the errors are Error's
	return errs
}
