package generator

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOnlyLocalRefs checks the text test that spares parsing a spec
// without references to other files: it must never say so of a spec that
// has one, however the $ref is written.
func TestOnlyLocalRefs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"openapi: 3.0.0\n", true},
		{"schema:\n  $ref: '#/components/schemas/Pet'\n", true},
		{"schema:\n  $ref: \"#/components/schemas/Pet\"\n", true},
		{`{"schema": {"$ref": "#/components/schemas/Pet"}}`, true},
		{`{"schema": {"$ref" : "#/components/schemas/Pet"}}`, true},
		{"schema:\n  $ref: pet.yaml\n", false},
		{"schema:\n  $ref: './pet.yaml#/Pet'\n", false},
		{`{"schema": {"$ref": "pet.json"}}`, false},
		{"schema:\n  '$ref': pet.yaml\n", false},
		{"schema:\n  $ref:\n    pet.yaml\n", false},
		{"schema:\n  $ref: >-\n    pet.yaml\n", false},
		{`{"schema": {"\u0024ref": "pet.json"}}`, false},
		{"schema:\n  \"\\x24ref\": pet.yaml\n", false},
		{"description: the $refs are resolved\n", false}, // a doubt: parsed
	} {
		if got := onlyLocalRefs([]byte(c.src)); got != c.want {
			t.Errorf("onlyLocalRefs(%q) = %v, want %v", c.src, got, c.want)
		}
	}
}

// TestReadRefsFollowsFiles checks that readRefs still reads the files a
// spec references, and those they reference.
func TestReadRefsFollowsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := "components:\n  schemas:\n    Pet:\n      $ref: pet.yaml\n"
	write("pet.yaml", "properties:\n  owner:\n    $ref: \"owner.yaml#/Owner\"\n")
	write("owner.yaml", "Owner:\n  type: string\n")
	refs, errs := readRefs(filepath.Join(dir, "openapi.yaml"), []byte(spec))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	for _, name := range []string{"pet.yaml", "owner.yaml"} {
		if _, ok := refs[filepath.Join(dir, name)]; !ok {
			t.Errorf("%s not read; read %v", name, refs)
		}
	}
}
