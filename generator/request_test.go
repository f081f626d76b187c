package generator_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"golang.org/x/mod/modfile"
)

// A spec split over files: the path item of /refunds lives in a file of
// its own. (oapi-codegen takes a schema or parameter from another file
// only with an import mapping, into a package of its own.)
const (
	splitSpec = `openapi: 3.0.3
info:
  title: split
  version: "1"
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: true
      requestBody:
        required: true
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
  /refunds:
    $ref: "paths/refunds.yaml"
`
	refundsPath = `get:
  operationId: listRefunds
  parameters:
    - name: limit
      in: query
      schema:
        type: integer
  responses:
    "200":
      description: the refunds
`
)

// Generate reads nothing but its request: a request built in memory, for
// a spec and config in a folder that does not exist, generates what
// Load and Generate make of the same files on disk, byte for byte, $refs
// to other files included.
func TestGenerateFromMemory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(splitSpec))
	writeFile(t, filepath.Join(dir, "paths", "refunds.yaml"), []byte(refundsPath))
	fromDisk := generate(t, configFor(t, dir, "openapi.yaml", ""))
	if fromDisk.Operations != 2 || fromDisk.Idempotent != 1 {
		t.Fatalf("%d operations, %d idempotent; want 2 and 1", fromDisk.Operations, fromDisk.Idempotent)
	}

	nowhere := filepath.Join(dir, "does-not-exist")
	req := generator.Request{
		Config: configFor(t, nowhere, "openapi.yaml", ""),
		Spec:   []byte(splitSpec),
		Refs: map[string][]byte{
			filepath.Join(nowhere, "paths", "refunds.yaml"): []byte(refundsPath),
		},
	}
	fromMemory, err := generator.Generate(req)
	if err != nil {
		t.Fatalf("Generate from memory: %v", err)
	}
	if len(fromMemory.Files) != len(fromDisk.Files) {
		t.Fatalf("%d files from memory, %d from disk", len(fromMemory.Files), len(fromDisk.Files))
	}
	for i, f := range fromDisk.Files {
		m := fromMemory.Files[i]
		if m.Path != f.Path || !bytes.Equal(m.Content, f.Content) {
			t.Errorf("file %d: %s from memory differs from %s from disk", i, m.Path, f.Path)
		}
	}
	oapi := string(fromDisk.Files[0].Content)
	if !strings.Contains(oapi, "ListRefundsParams") || !strings.Contains(oapi, "Limit *int") {
		t.Errorf("the path item of the other file is not in oapi-codegen's output:\n%.2000s", oapi)
	}

	// Without the referenced file, the reference is named at its line.
	req.Refs = nil
	_, err = generator.Generate(req)
	if err == nil {
		t.Fatal("Generate succeeded without the path item's file")
	}
	if want := filepath.Join(nowhere, "openapi.yaml") + `:23:11: $ref "paths/refunds.yaml" names a file that cannot be read`; !strings.Contains(err.Error(), want) {
		t.Errorf("error\n%v\nwant it to hold\n%s", err, want)
	}
}

// The conformance kit imports the output by the import path the request
// carries; without one (no module holds the output), tests: true is a
// config error that says so.
func TestKitNeedsTheOutputsImport(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "does-not-exist")
	req := generator.Request{Config: configFor(t, nowhere, "openapi.yaml", "tests: true\n")}
	req.Spec = []byte(strings.Replace(splitSpec, "  /refunds:\n    $ref: \"paths/refunds.yaml\"\n", "", 1))
	_, err := generator.Generate(req)
	if !errors.Is(err, generator.ErrConfig) || !strings.Contains(err.Error(), "tests: true needs output.dir") {
		t.Fatalf("Generate without the output's import path: %v, want a config error saying tests: true needs a module", err)
	}
	req.OutputImport = "example.com/split/gen"
	res, err := generator.Generate(req)
	if err != nil {
		t.Fatalf("Generate with the output's import path: %v", err)
	}
	kits := 0
	for _, f := range res.Files {
		if strings.HasSuffix(f.Path, "conformance.gen.go") {
			kits++
			if !bytes.Contains(f.Content, []byte(`"example.com/split/gen"`)) {
				t.Errorf("%s does not import the output by the request's import path", f.Path)
			}
		}
	}
	if kits != 1 {
		t.Errorf("%d conformance kits generated, want 1", kits)
	}
}

// A reference to a remote document is refused, saying what to do: the
// generator reads local files only.
func TestRemoteRefRefused(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "does-not-exist")
	req := generator.Request{
		Config: configFor(t, nowhere, "openapi.yaml", ""),
		Spec:   []byte(strings.Replace(splitSpec, `$ref: "paths/refunds.yaml"`, `$ref: "https://example.com/refunds.yaml"`, 1)),
	}
	_, err := generator.Generate(req)
	if err == nil || !strings.Contains(err.Error(), `remote reference "https://example.com/refunds.yaml": idemgen reads local files only`) ||
		!strings.Contains(err.Error(), "save the document beside the spec") {
		t.Fatalf("Generate with a remote reference: %v, want it refused with what to do", err)
	}
}

// Generate is a function of its request alone: the example's request,
// built in memory and placed in a folder that does not exist, run from a
// working directory that holds nothing, generates the example's committed
// output byte for byte, warnings included.
func TestGenerateIsPure(t *testing.T) {
	example, err := filepath.Abs(filepath.Join("..", "example"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	committed, err := generator.LoadConfig(filepath.Join(example, "idemgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := generator.Load(committed)
	if err != nil {
		t.Fatal(err)
	}
	nowhere := filepath.Join(t.TempDir(), "does-not-exist")
	cfg, err := generator.ParseConfig(filepath.Join(nowhere, "idemgen.yaml"), read("idemgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	req := generator.Request{
		Config:       cfg,
		Spec:         read("openapi.yaml"),
		Layer:        read(filepath.Join("gen", "idempotency.gen.go")),
		Migrations:   slices.Clone(onDisk.Migrations),
		OutputImport: "github.com/idemgen/idemgen/example/gen",
		OapiCodegen:  requiredVersion(t, "github.com/oapi-codegen/oapi-codegen/v2"),
	}
	if len(req.Migrations) == 0 {
		t.Fatal("the example's migration folder lists no files")
	}
	t.Chdir(t.TempDir())
	res, err := generator.Generate(req)
	if err != nil {
		t.Fatalf("Generate from memory: %v", err)
	}
	if len(res.Files) < 30 {
		t.Fatalf("%d files generated, want the example's 32", len(res.Files))
	}
	for _, f := range res.Files {
		if want := read(f.Path); !bytes.Equal(f.Content, want) {
			t.Errorf("%s generated from memory differs from the committed file", f.Path)
		}
	}
	if len(res.Stale) != 0 {
		t.Errorf("stale files %q, want none", res.Stale)
	}
	fromDisk, err := generator.Generate(onDisk)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Warnings, fromDisk.Warnings) {
		t.Errorf("warnings from memory\n%q\ndiffer from those of the files on disk\n%q", res.Warnings, fromDisk.Warnings)
	}
}

// requiredVersion is the version of module path that go.mod requires: the
// one a binary of this module is built with. (A test binary does not
// record its modules' versions.)
func requiredVersion(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == path {
			return r.Mod.Version
		}
	}
	t.Fatalf("go.mod does not require %s", path)
	return ""
}
