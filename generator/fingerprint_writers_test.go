package generator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
)

// The generated fingerprint writers must give the fingerprints
// idem.Fingerprint gives, byte for byte, so that keys stored before them
// keep matching their requests. These tests generate a package, add a
// test that fills each annotated operation's request object with random
// values and compares the writer with idem.Fingerprint called as the
// generated code called it before, and run it.

// fingerprintTest is the Go test comparing res's writers with the
// reference, over n random requests per operation.
func fingerprintTest(t *testing.T, pkg string, res *generator.Result, n int) string {
	t.Helper()
	checks := generator.FingerprintChecks(res)
	if len(checks) == 0 {
		t.Fatal("no annotated operations to check")
	}
	var b strings.Builder
	fmt.Fprintf(&b, `package %s

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/randvalue"
)

var (
	_ = http.MethodPost
	_ url.Values
)

func TestFingerprintWritersMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range %d {
`, pkg, n)
	for _, c := range checks {
		fmt.Fprintf(&b, `		{
			var request %sRequestObject
			randvalue.Fill(r, &request)
			var form url.Values
			randvalue.Fill(r, &form)
			ctx := idem.WithRequest(context.Background(), &http.Request{Form: form, PostForm: form})
`, c.GoName)
		if c.Multipart {
			b.WriteString("\t\t\tvar multipartParts []idem.MultipartPart\n\t\t\trandvalue.Fill(r, &multipartParts)\n")
		}
		fmt.Fprintf(&b, `			got, gotErr := %s
			want, wantErr := %s
			if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("%s, request %%d %%#v: writer %%x (error %%v), idem.Fingerprint %%x (error %%v)", i, request, got, gotErr, want, wantErr)
			}
		}
`, c.Writer, c.Reference, c.GoName)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// runFingerprintTest writes cfg's package, as res holds it or as cfg
// generates it when res is nil, and runs its fingerprint test.
func runFingerprintTest(t *testing.T, cfg *generator.Config, res *generator.Result, n int) {
	t.Helper()
	if res == nil {
		res = generate(t, cfg)
	}
	pkg := writeGoPackage(t, res, map[string]string{"fingerprint_run_test.go": fingerprintTest(t, cfg.Output.Package, res, n)})
	goTest(t, pkg, "-run", "TestFingerprintWritersMatch")
}

func TestFingerprintWritersMatch(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"shapes", "orders", "payments", "refunds", "scopes", "declaredkey"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runFingerprintTest(t, loadConfig(t, filepath.Join("testdata", name, "idemgen.yaml")), nil, 2000)
		})
	}
}

// TestFingerprintWritersMatchRealSpecs does the same for the real specs
// whose server code compiles, with every operation that may carry a
// body annotated (but those the layer refuses, such as XML bodies).
func TestFingerprintWritersMatchRealSpecs(t *testing.T) {
	t.Parallel()
	dir := realspecs.Dir(t)
	for _, file := range []string{
		"Adyen-adyen-openapi__CheckoutService-v71.json",
		"OAI-OpenAPI-Specification__callback-example.json",
		"OAI-OpenAPI-Specification__link-example.yaml",
		"OAI-OpenAPI-Specification__petstore-expanded.yaml",
		"OAI-OpenAPI-Specification__uspto.yaml",
		"XeroAPI-Xero-OpenAPI__xero_accounting.yaml",
		"discord-api-spec__openapi.json",
		"swagger-api-swagger-petstore__openapi.yaml",
	} {
		t.Run(strings.TrimSuffix(file, filepath.Ext(file)), func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			cfg, ops, res := annotateEveryOperation(t, filepath.Join(dir, file), tmp)
			t.Logf("%d operations annotated", ops)
			checkRequestSchemas(t, res)
			runFingerprintTest(t, cfg, res, 200)
		})
	}
}

// annotateEveryOperation writes a copy of the spec in which every post,
// put, patch and delete operation has x-idempotent: true, leaving out
// those Generate refuses, and returns its config, how many are left and
// what Generate made of it.
func annotateEveryOperation(t *testing.T, spec, dir string) (*generator.Config, int, *generator.Result) {
	t.Helper()
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{}
	// Generate reports every problem it finds, each on a line of its own
	// that starts with the place; all are left out at once, as each run
	// over a large spec takes a second.
	errAt := regexp.MustCompile(`(?m)^\s*[^\n]*?\.yaml:(\d+):\d+: `)
	for range 100 {
		var doc yaml.Node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			t.Fatal(err)
		}
		ops := annotateNodes(&doc, skip)
		out, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "openapi.yaml")
		writeFile(t, path, out)
		// The lines the annotations landed on, to tell which one an
		// error names.
		var written yaml.Node
		if err := yaml.Unmarshal(out, &written); err != nil {
			t.Fatal(err)
		}
		lines := map[int]string{}
		annotationLines(&written, lines)
		cfg := configFor(t, dir, path, "")
		cfg.Output.Spec = ""
		res, err := generateFrom(cfg)
		if err == nil {
			return cfg, ops, res
		}
		found := errAt.FindAllStringSubmatch(err.Error(), -1)
		if found == nil {
			t.Fatalf("Generate: %v", err)
		}
		for _, m := range found {
			line, _ := strconv.Atoi(m[1])
			op, ok := lines[line]
			if !ok || skip[op] {
				t.Fatalf("Generate: %v", err)
			}
			skip[op] = true
		}
	}
	t.Fatal("too many operations refused")
	return nil, 0, nil
}

var bodyMethods = []string{"post", "put", "patch", "delete"}

// annotateNodes adds x-idempotent: true to the operations of doc but
// those in skip ("post /pets"), and counts them.
func annotateNodes(doc *yaml.Node, skip map[string]bool) int {
	n := 0
	eachOperation(doc, func(op string, node *yaml.Node) {
		if method, _, _ := strings.Cut(op, " "); !slices.Contains(bodyMethods, method) || skip[op] {
			return
		}
		node.Content = append([]*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "x-idempotent"},
			{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
		}, node.Content...)
		n++
	})
	return n
}

// annotationLines maps the line of each x-idempotent key to its
// operation.
func annotationLines(doc *yaml.Node, lines map[int]string) {
	eachOperation(doc, func(op string, node *yaml.Node) {
		if len(node.Content) > 0 && node.Content[0].Value == "x-idempotent" {
			lines[node.Content[0].Line] = op
		}
	})
}

// eachOperation calls f with each member of each path item of doc, as
// "method /path"; those that are not operations never match.
func eachOperation(doc *yaml.Node, f func(op string, node *yaml.Node)) {
	paths := mapValue(doc.Content[0], "paths")
	if paths == nil {
		return
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		item := paths.Content[i+1]
		for j := 0; j+1 < len(item.Content); j += 2 {
			f(item.Content[j].Value+" "+paths.Content[i].Value, item.Content[j+1])
		}
	}
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
