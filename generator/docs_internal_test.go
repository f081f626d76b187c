package generator

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// configKeys lists every key idemgen.yaml accepts, dotted, as the parser
// finds them (yamlFields, which checkNode uses): the keys of idemgen's own
// types, nested, and of a type of another module, such as oapi-codegen's
// output-options, one level only, since what lies below is that module's
// to document. top are the keys at the file's top level.
func configKeys() (keys, top []string) {
	own := reflect.TypeFor[Config]().PkgPath()
	var walk func(t reflect.Type, prefix string, deeper bool)
	walk = func(t reflect.Type, prefix string, deeper bool) {
		names, types := yamlFields(t)
		for _, name := range names {
			keys = append(keys, prefix+name)
			ft := types[name]
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if deeper && ft.Kind() == reflect.Struct {
				walk(ft, prefix+name+".", ft.PkgPath() == own)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", true)
	top, _ = yamlFields(reflect.TypeFor[Config]())
	return keys, top
}

// configKey is a dotted key as docs/CONFIG.md writes it in code.
var configKey = regexp.MustCompile("`([a-z][a-z0-9-]*(?:\\.[a-z][a-z0-9-]*)+)`")

// TestDocsReferenceComplete holds docs/CONFIG.md to the keys the config
// parser accepts: each is named there, dotted, as
// `migrations.lock-timeout`, and no dotted key under a top-level one is
// named that the parser would refuse.
func TestDocsReferenceComplete(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	keys, top := configKeys()
	for _, key := range keys {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/CONFIG.md does not document `%s`, which idemgen.yaml accepts", key)
		}
	}
	for _, m := range configKey.FindAllStringSubmatch(string(doc), -1) {
		first, _, _ := strings.Cut(m[1], ".")
		if slices.Contains(top, first) && !slices.Contains(keys, m[1]) {
			t.Errorf("docs/CONFIG.md documents `%s`, which idemgen.yaml does not accept", m[1])
		}
	}
}

// The example at the top of docs/CONFIG.md is a valid configuration that
// sets every key of idemgen's own.
func TestDocsConfigExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/CONFIG.md has no yaml example")
	}
	path := filepath.Join(t.TempDir(), "idemgen.yaml")
	if _, err := ParseConfig(path, []byte(example)); err != nil {
		t.Fatalf("docs/CONFIG.md's example does not parse: %v", err)
	}
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(example), &node); err != nil {
		t.Fatal(err)
	}
	keys, _ := configKeys()
	for _, key := range keys {
		if strings.HasPrefix(key, "oapi-codegen.output-options.") {
			continue // oapi-codegen's own: one stands for them all
		}
		if valueNode(&node, key) == nil {
			t.Errorf("docs/CONFIG.md's example does not set %s", key)
		}
	}
}

// The warning about a changed scope or fingerprint, and the contract of
// every generated file, send readers to a section of the README by its
// title: the README must keep a heading with that title.
func TestContractDocSection(t *testing.T) {
	title, _, ok := strings.Cut(strings.TrimPrefix(contractDoc, `"`), `"`)
	if !ok {
		t.Fatalf("contractDoc names no section: %s", contractDoc)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^#{2,4} ` + regexp.QuoteMeta(title) + `$`).Match(readme) {
		t.Errorf("README.md has no heading %q, which idemgen's warnings and generated files point at", title)
	}
}
