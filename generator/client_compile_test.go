package generator_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/internal/realspecs"
	"gopkg.in/yaml.v3"
)

// TestClientCompilesEverySpec generates IdempotentClient (client: true)
// for every spec of the real-spec corpus, with a POST, PUT, PATCH or
// DELETE operation of each shape of client method annotated (see
// annotateMutating; those the layer refuses are left out), and for a
// spec of its own whose path parameters have types of other packages
// (openapi_types.UUID, time.Time, openapi_types.Date) or the names of
// the method's locals: wherever Generate succeeds and the server
// compiles, the client, in the same package, must compile too. Generate
// must not refuse its own client as code that would not compile, either.
//
// Compiling the output of the large specs (megabytes of Go) with go build
// and go vet takes about half a minute each on a 2-core machine, so the
// package is type-checked in process with go/types instead, which reports
// every error the compiler's type checker does (unused imports and
// variables included), against the export data that go list -export
// builds for its imports once. TestClientHonoursDeclaredKeyLimits builds
// its own spec's package with the go command.
func TestClientCompilesEverySpec(t *testing.T) {
	t.Parallel()
	exports := &exportData{files: map[string]string{}}
	t.Run("clientlimits", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join("testdata", "clientlimits")
		res := generate(t, configFor(t, dir, "openapi.yaml", "client: true\n"))
		checkClientCompiles(t, exports, res)
	})
	t.Run("corpus", func(t *testing.T) {
		t.Parallel()
		specsDir := realspecs.Dir(t)
		for file := range indexedSpecs(t) {
			t.Run(strings.TrimSuffix(file, filepath.Ext(file)), func(t *testing.T) {
				t.Parallel() // Generate serialises oapi-codegen itself
				res := generateAnnotated(t, filepath.Join(specsDir, file))
				if res != nil {
					checkClientCompiles(t, exports, res)
				}
			})
		}
	})
}

// generateAnnotated generates the spec at path with client: true and a
// mutating operation of each shape annotated, leaving out the shapes the
// layer refuses. It returns nil when Generate fails for another reason (a spec
// oapi-codegen makes code of that does not compile), and fails the test
// when Generate refuses the code it makes itself.
func generateAnnotated(t *testing.T, path string) *generator.Result {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{} // shapes of operations the layer refuses
	for range 3 {
		spec, annotated := annotateMutating(t, path, dir, skip)
		n := len(annotated)
		if n == 0 {
			t.Skip("no operation to annotate")
		}
		start := time.Now()
		res, err := generateNoPanic(t, configFor(t, dir, spec, "client: true\n"))
		t.Logf("Generate with %d operations annotated: %v", n, time.Since(start).Round(time.Millisecond))
		if err == nil {
			if res.Idempotent == 0 {
				t.Skip("no annotated operation generated")
			}
			return res
		}
		if strings.Contains(err.Error(), "a generator bug") {
			t.Fatalf("Generate refused its own output: %v", err)
		}
		refused := refusedOperations(err)
		if refused == nil {
			t.Skipf("Generate fails, not because of the annotations: %.300s", err)
			return nil
		}
		for _, op := range refused {
			skip[annotated[op]] = true
		}
	}
	t.Fatalf("Generate still refuses annotations after three rounds")
	return nil
}

var refusedAnnotation = regexp.MustCompile(`^[^ ]*:\d+:\d+: x-idempotent on ([A-Z]+) ([^ ]+): `)

// refusedOperations are the operations, "METHOD path", whose annotation
// err refuses; nil when err has an error of another kind.
func refusedOperations(err error) []string {
	var ops []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line == "" {
			continue
		}
		m := refusedAnnotation.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		ops = append(ops, m[1]+" "+m[2])
	}
	return ops
}

// annotateMutating writes into dir a copy of the spec at path, in YAML,
// cut down to one POST, PUT, PATCH or DELETE operation of each shape of
// client method, annotated with x-idempotent: true, but for the shapes
// skip holds. It returns the copy's path and the shape of each operation
// it annotated, by "METHOD path".
//
// IdempotentClient's code for an operation depends only on the Go types
// of its path parameters, whether it has others (its Params), how it
// declares an Idempotency-Key, and the media types of its request
// bodies: those make its shape (clientShape). Operations of one shape
// differ in names only, so one of each covers the client's code, and the
// copy leaves the others out, with every GET: oapi-codegen prunes the
// schemas nothing left uses, which keeps a spec of megabytes (Stripe's)
// to seconds rather than half a minute.
func annotateMutating(t *testing.T, path, dir string, skip map[string]bool) (string, map[string]string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// Operations left out may hold anchors that others' aliases name, so
	// every alias becomes a copy of what it names first.
	var expand func(n *yaml.Node) *yaml.Node
	expand = func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		c := *n
		c.Anchor = ""
		// JSON's flow style would make lines of a megabyte; its quoted
		// strings stay quoted, which keeps tabs and line breaks intact.
		if c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode {
			c.Style = 0
		}
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, child := range n.Content {
			c.Content[i] = expand(child)
		}
		return &c
	}
	root := expand(doc.Content[0])
	doc.Content[0] = root
	shapes := map[string]bool{}
	annotated := map[string]string{}
	paths := yamlField(root, "paths")
	var kept []*yaml.Node
	for i := 0; paths != nil && i+1 < len(paths.Content); i += 2 {
		route, item := paths.Content[i].Value, paths.Content[i+1]
		if item.Kind != yaml.MappingNode || yamlField(item, "$ref") != nil {
			continue
		}
		var fields []*yaml.Node
		annotatedHere := false
		for j := 0; j+1 < len(item.Content); j += 2 {
			key, op := item.Content[j], item.Content[j+1]
			switch key.Value {
			case "get", "head", "options", "trace":
				continue
			case "post", "put", "patch", "delete":
				if op.Kind != yaml.MappingNode {
					continue
				}
				shape := clientShape(root, item, op)
				if shapes[shape] || skip[shape] {
					continue
				}
				shapes[shape] = true
				op.Content = append([]*yaml.Node{
					{Kind: yaml.ScalarNode, Tag: "!!str", Value: "x-idempotent"},
					{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
				}, op.Content...)
				annotated[strings.ToUpper(key.Value)+" "+route] = shape
				annotatedHere = true
			}
			fields = append(fields, key, op)
		}
		if annotatedHere {
			item.Content = fields
			kept = append(kept, paths.Content[i], item)
		}
	}
	if paths != nil {
		paths.Content = kept
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".yaml")
	writeFile(t, copied, out)
	return copied, annotated
}

// clientShape describes what IdempotentClient's code for the operation op
// of the path item depends on: its path parameters' schemas, whether it
// has other parameters, its Idempotency-Key parameter's schema, and its
// request bodies' media types.
func clientShape(root, item, op *yaml.Node) string {
	params := map[string]*yaml.Node{} // by in and name; the operation's win
	for _, list := range []*yaml.Node{yamlField(item, "parameters"), yamlField(op, "parameters")} {
		if list == nil {
			continue
		}
		for _, p := range list.Content {
			p = localRef(root, p)
			in, name := yamlField(p, "in"), yamlField(p, "name")
			if in != nil && name != nil {
				params[in.Value+" "+strings.ToLower(name.Value)] = p
			}
		}
	}
	var shape []string
	others := false
	for key, p := range params {
		schema := yamlField(p, "schema")
		switch {
		case key == "header idempotency-key":
			shape = append(shape, key+" "+schemaShape(root, schema))
		case strings.HasPrefix(key, "path "):
			// A path parameter's name only matters when the method has a
			// name of its own like it.
			if !slices.Contains(clientMethodLocals, strings.TrimPrefix(key, "path ")) {
				key = "path"
			}
			shape = append(shape, key+" "+schemaShape(root, schema))
		default:
			others = true
		}
	}
	slices.Sort(shape)
	shape = append(shape, fmt.Sprint("params ", others))
	if body := localRef(root, yamlField(op, "requestBody")); body != nil {
		content := yamlField(body, "content")
		for i := 0; content != nil && i+1 < len(content.Content); i += 2 {
			shape = append(shape, "body "+content.Content[i].Value)
		}
	}
	return strings.Join(shape, "\n")
}

// clientMethodLocals are the names IdempotentClient's methods use besides
// their path parameters; a path parameter named like one is renamed.
var clientMethodLocals = []string{"c", "ctx", "params", "body", "reqEditors", "opts", "key", "editors", "context", "http", "idemclient"}

// schemaShape describes what of a parameter's schema makes its Go type:
// the schema it names, else its type, format and items, and whether it
// is an enum or has properties (both of which make named types).
func schemaShape(root, schema *yaml.Node) string {
	if ref := yamlField(schema, "$ref"); ref != nil {
		return ref.Value
	}
	var shape []string
	for _, key := range []string{"type", "format", "enum", "properties", "items", "allOf", "anyOf", "oneOf", "x-go-type", "x-go-type-import", "nullable"} {
		v := yamlField(schema, key)
		switch {
		case v == nil:
		case key == "items":
			shape = append(shape, "items "+schemaShape(root, v))
		case v.Kind == yaml.ScalarNode:
			shape = append(shape, key+" "+v.Value)
		default:
			out, _ := yaml.Marshal(v)
			shape = append(shape, key+" "+string(out))
		}
	}
	return "{" + strings.Join(shape, ", ") + "}"
}

// yamlField is the value of key in the mapping m, or nil.
func yamlField(m *yaml.Node, key string) *yaml.Node {
	for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// localRef follows n's $ref into the document, once; n itself when it
// is none or names something elsewhere.
func localRef(root, n *yaml.Node) *yaml.Node {
	ref := yamlField(n, "$ref")
	if ref == nil || !strings.HasPrefix(ref.Value, "#/") {
		return n
	}
	target := root
	for _, tok := range strings.Split(strings.TrimPrefix(ref.Value, "#/"), "/") {
		target = yamlField(target, strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
	}
	if target == nil {
		return n
	}
	return target
}

// checkClientCompiles type-checks the generated package (the Go files
// writeGoPackage writes) and fails the test on an error in the client's
// file. Errors only elsewhere mean the server does not compile either;
// the test then skips, naming them.
func checkClientCompiles(t *testing.T, exports *exportData, res *generator.Result) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	var client bool
	imports := map[string]bool{}
	for _, f := range res.Files {
		if !strings.HasSuffix(f.Path, ".go") || strings.HasSuffix(f.Path, "conformance.gen.go") {
			continue
		}
		client = client || filepath.Base(f.Path) == "idempotency_client.gen.go"
		file, err := parser.ParseFile(fset, filepath.Base(f.Path), f.Content, 0)
		if err != nil {
			t.Fatalf("%s does not parse: %v", f.Path, err)
		}
		files = append(files, file)
		for _, i := range file.Imports {
			p, _ := strconv.Unquote(i.Path.Value)
			imports[p] = true
		}
	}
	if !client {
		t.Fatal("no idempotency_client.gen.go generated")
	}
	start := time.Now()
	lookup := exports.lookup(t, imports)
	var clientErrs, otherErrs []string
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", lookup),
		Error: func(err error) {
			var te types.Error
			if !errors.As(err, &te) {
				otherErrs = append(otherErrs, err.Error())
				return
			}
			if te.Fset.Position(te.Pos).Filename == "idempotency_client.gen.go" {
				clientErrs = append(clientErrs, err.Error())
			} else {
				otherErrs = append(otherErrs, err.Error())
			}
		},
	}
	_, _ = conf.Check("gen", fset, files, nil) // the errors are Error's
	t.Logf("type-checked %d files in %v", len(files), time.Since(start).Round(time.Millisecond))
	if len(clientErrs) > 0 {
		t.Fatalf("the client does not compile:\n%s", strings.Join(clientErrs, "\n"))
	}
	if len(otherErrs) > 0 {
		t.Skipf("the server does not compile either: %.1000s", strings.Join(otherErrs, "\n"))
	}
}

// exportData holds the files of compiled export data of packages, by
// import path, which go list -export builds (or finds in the build
// cache) once per package for all the subtests.
type exportData struct {
	mu    sync.Mutex
	files map[string]string
}

// lookup returns an importer's lookup function for the packages imports
// names and their dependencies.
func (e *exportData) lookup(t *testing.T, imports map[string]bool) func(path string) (io.ReadCloser, error) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var missing []string
	for p := range imports {
		if _, ok := e.files[p]; !ok && p != "C" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		out, err := runGo(t, append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, missing...)...)
		if err != nil {
			t.Fatalf("go list -export: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if p, file, ok := strings.Cut(line, "\t"); ok && file != "" {
				e.files[p] = file
			}
		}
	}
	files := make(map[string]string, len(e.files))
	for p, f := range e.files {
		files[p] = f
	}
	return func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	}
}

// TestClientCompileCheck: Generate's check of the code it writes covers
// the client's file, so that a spec whose names collide with the
// client's is refused, at the two declarations, rather than breaking the
// user's build.
func TestClientCompileCheck(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(`openapi: 3.0.3
info: {title: names, version: "1"}
paths:
  /clients:
    post:
      operationId: createClient
      x-idempotent: true
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/IdempotentClient"}
      responses:
        "204": {description: Done.}
components:
  schemas:
    IdempotentClient:
      type: object
      properties:
        name: {type: string}
`))
	generate(t, configFor(t, dir, "openapi.yaml", "")) // no client, no collision
	_, err := generateFrom(configFor(t, dir, "openapi.yaml", "client: true\n"))
	want := regexp.MustCompile(`: the generated code would not compile:\n\tgen/idempotency_client\.gen\.go:\d+:6: IdempotentClient is declared again, first at gen/oapi\.gen\.go:\d+:6; rename the schema or operation that makes the name`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("got %v; want an error matching %s", err, want)
	}
}
