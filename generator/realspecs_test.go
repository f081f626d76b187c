package generator_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
)

// indexedSpecs returns the operation count of each spec INDEX.tsv lists,
// by file name.
func indexedSpecs(t *testing.T) map[string]int {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(realspecs.Dir(t), "INDEX.tsv"))
	if err != nil {
		t.Fatalf("the real specs are missing: %v", err)
	}
	specs := map[string]int{}
	lines := bufio.NewScanner(bytes.NewReader(index))
	for lines.Scan() {
		cols := strings.Split(lines.Text(), "\t")
		if len(cols) < 7 || cols[0] == "file" { // blank or the header
			continue
		}
		ops, err := strconv.Atoi(cols[6])
		if err != nil {
			t.Fatalf("INDEX.tsv: %s: operations %q: %v", cols[0], cols[6], err)
		}
		specs[cols[0]] = ops
	}
	if len(specs) == 0 {
		t.Fatal("INDEX.tsv lists no specs")
	}
	return specs
}

// realSpecCases says what idemgen makes of each real spec. None carries
// annotations; some cases add x-idempotent: true to the first post
// operation to run the idempotency layer over a real spec.
var realSpecCases = []struct {
	file string
	// extra is appended to the config.
	extra string
	// annotate adds x-idempotent: true to the first "post:" in the file.
	annotate bool
	// want is "" for success, otherwise the start of the error message
	// after the spec's path (and, when annotated, after the annotation's
	// ":line:col: ").
	want string
	// compile builds and vets the output.
	compile bool
	// warning is the one warning of the annotation expected, after the
	// spec's path and the annotation's ":line:col: "; "" for none.
	warning string
	// resolved counts the warnings of causes idemgen resolved for
	// oapi-codegen's output to compile (see resolve.go), each of which
	// holds resolvedLike.
	resolved     int
	resolvedLike string
	// elsewhere names the test that covers the spec instead, when
	// generating it takes long.
	elsewhere string
}{
	{file: "Adyen-adyen-openapi__CheckoutService-v71.json"},
	{
		// Responses with examples and no schema: bodies of any JSON.
		file:         "OAI-OpenAPI-Specification__api-with-examples.yaml",
		compile:      true,
		resolved:     4,
		resolvedLike: "has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue",
	},
	{file: "OAI-OpenAPI-Specification__callback-example.json", compile: true},
	{file: "OAI-OpenAPI-Specification__link-example.yaml", compile: true},
	{file: "OAI-OpenAPI-Specification__link-example.yaml", annotate: true, compile: true},
	{file: "OAI-OpenAPI-Specification__petstore-expanded.yaml", compile: true},
	{file: "OAI-OpenAPI-Specification__petstore-expanded.yaml", annotate: true, compile: true},
	{file: "OAI-OpenAPI-Specification__petstore.yaml", compile: true},
	{file: "OAI-OpenAPI-Specification__uspto.yaml", compile: true},
	{file: "OAI-OpenAPI-Specification__uspto.yaml", annotate: true, compile: true}, // a form-encoded POST
	{
		// Pruning would drop the Pet schema the webhook's body type names.
		file:         "OAI-OpenAPI-Specification__webhook-example-3.1.yaml",
		compile:      true,
		resolved:     1,
		resolvedLike: "yet the webhooks' types name schema Pet; generated with oapi-codegen.output-options.skip-prune: true",
	},
	{
		file:    "OAI-OpenAPI-Specification__webhook-example-3.1.yaml",
		extra:   "oapi-codegen:\n  output-options:\n    skip-prune: true\n",
		compile: true,
	},
	{file: "XeroAPI-Xero-OpenAPI__xero_accounting.yaml"},
	{
		// Every operation names its tenant by a header and requires OAuth2.
		file:     "XeroAPI-Xero-OpenAPI__xero_accounting.yaml",
		annotate: true,
		warning: "warning: x-idempotent on POST /Accounts/{AccountID}: keys are shared by every caller, but the operation declares header xero-tenant-id and requires security scheme OAuth2; " +
			"set scope: {header: xero-tenant-id} in x-idempotent or x-idempotency, scope: {function: true} if idem.Options.Scope scopes keys in Go, or scope: none if callers may share keys",
	},
	{file: "discord-api-spec__openapi.json"},
	{
		// The inline enums of the schemas *Response.object are named like
		// the strict server's response types of their operations.
		file:         "openai-openapi__openapi-2023-11-3.0.yaml",
		compile:      true,
		resolved:     13,
		resolvedLike: "like a type of the strict server; named it ",
	},
	{
		// The first post is POST /chat/completions. Besides the server's
		// resolutions, the augmented spec names the types of 23 schemas
		// apart from the client's response types (its client is built by
		// TestAugmentedClientCompilesEverySpec).
		file:         "openai-openapi__openapi-2023-11-3.0.yaml",
		annotate:     true,
		warning:      "warning: x-idempotent on POST /chat/completions: keys are shared by every caller, but the operation requires security scheme ApiKeyAuth; set scope: {function: true} in x-idempotent or x-idempotency and scope keys by the authenticated principal in idem.Options.Scope, or scope: none if callers may share keys",
		resolved:     14,
		resolvedLike: ", which changes no JSON",
	},
	{file: "stripe-openapi__spec3-2023-09.yaml", elsewhere: "TestStripeSpecBuilds"},
	{file: "swagger-api-swagger-petstore__openapi.yaml", compile: true},
	{
		// POST /pet takes JSON, XML or a form; XML reaches the handler as an
		// io.Reader.
		file:     "swagger-api-swagger-petstore__openapi.yaml",
		annotate: true,
		want:     "x-idempotent on POST /pet: request body application/xml reaches the handler undecoded, as an io.Reader, and cannot be fingerprinted",
	},
}

// TestRealSpecs runs Generate on every spec of the real-spec corpus (see
// internal/realspecs), without
// annotations and with some. Each must succeed or fail with a message that
// names the cause; none may panic, and the small ones' output must
// compile.
func TestRealSpecs(t *testing.T) {
	t.Parallel()
	specsDir := realspecs.Dir(t)
	index := indexedSpecs(t)
	covered := map[string]bool{}
	for _, tc := range realSpecCases {
		ops, ok := index[tc.file]
		if !ok {
			t.Errorf("%s is not in INDEX.tsv", tc.file)
			continue
		}
		if !tc.annotate && tc.extra == "" {
			covered[tc.file] = true
		}
		if tc.elsewhere != "" {
			continue // and covered there
		}
		name := strings.TrimSuffix(tc.file, filepath.Ext(tc.file))
		if tc.annotate {
			name += "+annotated"
		}
		if tc.extra != "" {
			name += "+options"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // Generate serialises oapi-codegen itself
			dir := t.TempDir()
			spec, err := filepath.Abs(filepath.Join(specsDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var pos string
			if tc.annotate {
				spec, pos = annotateFirstPost(t, spec, dir)
			}
			cfg := configFor(t, dir, spec, tc.extra)
			if tc.annotate {
				// The augmented spec of a real spec must validate, and
				// give a client that compiles where the server does.
				cfg.Output.Spec = "gen/openapi" + filepath.Ext(tc.file)
			}
			res, err := generateNoPanic(t, cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Generate: %v", err)
				}
				want := 0
				if tc.annotate {
					want = 1
				}
				var warnings, resolved []string
				for _, w := range res.Warnings {
					if tc.warning != "" && w == spec+pos+tc.warning {
						warnings = append(warnings, w)
						continue
					}
					resolved = append(resolved, w)
				}
				if tc.warning != "" && len(warnings) != 1 {
					t.Errorf("warnings %q, want %q among them", res.Warnings, spec+pos+tc.warning)
				}
				if len(resolved) != tc.resolved {
					t.Errorf("warnings %q; want %d of resolutions besides the annotation's", res.Warnings, tc.resolved)
				}
				for _, w := range resolved {
					if !strings.HasPrefix(w, spec+":") || !strings.Contains(w, ": warning: ") || !strings.Contains(w, tc.resolvedLike) {
						t.Errorf("warning %q, want one of a resolution that says %q", w, tc.resolvedLike)
					}
				}
				if res.Operations != ops || res.Idempotent != want {
					t.Errorf("%d operations, %d idempotent; want %d and %d", res.Operations, res.Idempotent, ops, want)
				}
				checkDigest(t, name, res, dir, spec)
				if tc.compile {
					compileGo(t, res)
					if tc.annotate {
						compileClient(t, augmented(t, res, cfg.Output.Spec))
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("Generate succeeded; want an error starting %q", tc.want)
			}
			msg, ok := strings.CutPrefix(err.Error(), spec+pos)
			if !ok || !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("got error\n%.1000s\nwant it to start with\n%s%s%s", err, spec, pos, tc.want)
			}
		})
	}
	for file := range index {
		if !covered[file] {
			t.Errorf("INDEX.tsv lists %s, which realSpecCases does not cover", file)
		}
	}
}

// generateNoPanic runs Generate, failing the test if it panics.
func generateNoPanic(t *testing.T, cfg *generator.Config) (res *generator.Result, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Generate panicked: %v", p)
		}
	}()
	return generateFrom(cfg)
}

// annotateFirstPost copies the YAML spec at path into dir with
// x-idempotent: true added as the first key of its first post operation,
// and returns the copy's path and ":line:col: " of the annotation.
func annotateFirstPost(t *testing.T, path, dir string) (annotated, pos string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != "post:" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		out := strings.Join(lines[:i+1], "") + strings.Repeat(" ", indent+2) + "x-idempotent: true\n" + strings.Join(lines[i+1:], "")
		annotated = filepath.Join(dir, filepath.Base(path))
		writeFile(t, annotated, []byte(out))
		return annotated, fmt.Sprintf(":%d:%d: ", i+2, indent+3)
	}
	t.Fatalf("no post operation in %s", path)
	return "", ""
}
