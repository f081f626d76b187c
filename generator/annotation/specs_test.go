package annotation

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/realspecs"
	"gopkg.in/yaml.v3"
)

// realSpec is one spec listed in INDEX.tsv.
type realSpec struct {
	path       string
	operations int // operations under paths (webhooks not counted)
}

// realSpecs returns the specs listed in INDEX.tsv.
func realSpecs(t testing.TB) []realSpec {
	t.Helper()
	specsDir := realspecs.Dir(t)
	index, err := os.ReadFile(filepath.Join(specsDir, "INDEX.tsv"))
	if err != nil {
		t.Fatalf("the real specs are missing: %v", err)
	}
	var specs []realSpec
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
		specs = append(specs, realSpec{filepath.Join(specsDir, cols[0]), ops})
	}
	if len(specs) == 0 {
		t.Fatalf("INDEX.tsv lists no specs")
	}
	return specs
}

func readSpec(t testing.TB, path string) []byte {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// The real specs carry no annotations: Read must accept them all, YAML
// and JSON, and find nothing.
func TestReadRealSpecs(t *testing.T) {
	for _, spec := range realSpecs(t) {
		path := spec.path
		t.Run(filepath.Base(path), func(t *testing.T) {
			ops, err := Read(path, readSpec(t, path))
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 0 {
				t.Fatalf("found %d annotated operations in a spec without annotations", len(ops))
			}
		})
	}
}

// annotateFirstPost inserts x-idempotent: true as the first key of the
// first post operation, and returns the position of the inserted key.
func annotateFirstPost(t *testing.T, path string, src []byte) ([]byte, Position) {
	t.Helper()
	isJSON := strings.HasSuffix(path, ".json")
	lines := strings.SplitAfter(string(src), "\n")
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		insert := ""
		switch {
		case !isJSON && strings.TrimSpace(line) == "post:":
			insert = strings.Repeat(" ", indent+2) + "x-idempotent: true\n"
		case isJSON && strings.HasPrefix(trimmed, `"post"`) && strings.HasSuffix(strings.TrimSpace(line), "{"):
			insert = strings.Repeat(" ", indent+2) + `"x-idempotent": true,` + "\n"
		default:
			continue
		}
		out := strings.Join(lines[:i+1], "") + insert + strings.Join(lines[i+1:], "")
		return []byte(out), Position{File: path, Line: i + 2, Column: indent + 3}
	}
	t.Fatalf("no post operation in %s", path)
	return nil, Position{}
}

// Annotating the first post operation of each real spec must yield
// exactly that operation, at the position of the inserted line. In the
// webhook-only example that post is a webhook, where the annotation has
// no effect: an error at that position.
func TestReadAnnotatedRealSpecs(t *testing.T) {
	for _, spec := range realSpecs(t) {
		path := spec.path
		src := readSpec(t, path)
		if !bytes.Contains(src, []byte("post")) {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			annotated, want := annotateFirstPost(t, path, src)
			ops, err := Read(path, annotated)
			if spec.operations == 0 {
				if err == nil || !strings.HasPrefix(err.Error(), want.String()+": x-idempotent has no effect on webhook") {
					t.Fatalf("an annotated webhook: %+v, %v; want an error at %s", ops, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 1 {
				t.Fatalf("found %d operations, want 1: %+v", len(ops), ops)
			}
			if op := ops[0]; op.Pos != want || op.Method != "POST" || !strings.HasPrefix(op.Path, "/") {
				t.Fatalf("got %s %s at %v, want POST at %v", op.Method, op.Path, op.Pos, want)
			}
		})
	}
}

// The JSON fallback must build the tree yaml.v3 builds, positions
// included, so that a document reads the same whichever parser read it.
// The minified form, one line of up to a megabyte, checks that columns
// are counted in linear time.
func TestJSONFallbackMatchesYAML(t *testing.T) {
	for _, spec := range realSpecs(t) {
		path := spec.path
		if !strings.HasSuffix(path, ".json") {
			continue
		}
		src := readSpec(t, path)
		var minified bytes.Buffer
		if err := json.Compact(&minified, src); err != nil {
			t.Fatal(err)
		}
		for form, src := range map[string][]byte{"indented": src, "minified": minified.Bytes()} {
			t.Run(filepath.Base(path)+"/"+form, func(t *testing.T) {
				fromYAML, err := parseYAML(src)
				if err != nil {
					t.Fatal(err)
				}
				fromJSON, jerr := parseJSON(path, src)
				if jerr != nil {
					t.Fatal(jerr)
				}
				if diff := compareNodes(fromYAML, fromJSON); diff != "" {
					t.Fatal(diff)
				}
			})
		}
	}
}

// compareNodes returns where two trees first differ in kind, value,
// position or, for strings, bools and nulls, tag.
func compareNodes(a, b *yaml.Node) string {
	if a.Kind != b.Kind || a.Value != b.Value || a.Line != b.Line || a.Column != b.Column || len(a.Content) != len(b.Content) {
		return fmt.Sprintf("yaml.v3 %d:%d kind %v %q (%d children) != json %d:%d kind %v %q (%d children)",
			a.Line, a.Column, a.Kind, a.Value, len(a.Content), b.Line, b.Column, b.Kind, b.Value, len(b.Content))
	}
	if a.Kind == yaml.ScalarNode && a.ShortTag() != b.ShortTag() && !isNumberTag(a.ShortTag()) {
		return fmt.Sprintf("%d:%d: tag %s != %s", a.Line, a.Column, a.ShortTag(), b.ShortTag())
	}
	for i := range a.Content {
		if diff := compareNodes(a.Content[i], b.Content[i]); diff != "" {
			return diff
		}
	}
	return ""
}

// isNumberTag: yaml.v3 calls integers too large for int64 floats; the
// package never reads numbers, so the difference does not matter.
func isNumberTag(tag string) bool { return tag == "!!int" || tag == "!!float" }

// BenchmarkReadStripe measures Read on the largest real spec (4 MB of
// YAML, 468 operations).
func BenchmarkReadStripe(b *testing.B) {
	src := readSpec(b, filepath.Join(realspecs.Dir(b), "stripe-openapi__spec3-2023-09.yaml"))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read("spec3.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}
