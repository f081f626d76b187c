package generator_test

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/*/golden")

// TestGolden generates each case under testdata and compares every file
// idemgen renders itself with testdata/<case>/golden/<path>. oapi-codegen's
// output is not kept as a golden: it would pin that dependency's formatting,
// and TestGoldenCompiles and the determinism tests cover it. Rewrite the
// goldens with
//
//	go test ./generator -run Golden -update
//
// and review the diff.
func TestGolden(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := generate(t, loadConfig(t, filepath.Join(dir, "idemgen.yaml")))
			golden := filepath.Join(dir, "golden")
			if *update {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				for _, f := range res.Files {
					if rendered(f.Path) {
						writeFile(t, filepath.Join(golden, f.Path), f.Content)
					}
				}
				return
			}
			var want []string
			for _, f := range res.Files {
				if !rendered(f.Path) {
					continue
				}
				want = append(want, filepath.ToSlash(f.Path))
				old, err := os.ReadFile(filepath.Join(golden, f.Path))
				if err != nil {
					t.Errorf("%v (run with -update to create it)", err)
					continue
				}
				if diff := firstDiff(old, f.Content); diff != "" {
					t.Errorf("%s differs from its golden file (run with -update to accept): %s", f.Path, diff)
				}
			}
			// A golden file nothing generates any more is stale.
			err := filepath.WalkDir(golden, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, err := filepath.Rel(golden, path)
				if err != nil {
					return err
				}
				if !slices.Contains(want, filepath.ToSlash(rel)) {
					t.Errorf("golden file %s is not generated any more (run with -update to remove it)", rel)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// rendered reports whether idemgen's own templates produce the file.
func rendered(path string) bool { return filepath.Base(path) != "oapi.gen.go" }

// TestGoldenCompiles type-checks and vets each golden case's Go output.
func TestGoldenCompiles(t *testing.T) {
	t.Parallel()
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			compileGo(t, generate(t, loadConfig(t, filepath.Join(dir, "idemgen.yaml"))))
		})
	}
}

// firstDiff describes the first line where got differs from want, or
// returns "".
func firstDiff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d:\n\twant: %s\n\tgot:  %s", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("the golden file has %d lines, the generated one %d", len(w), len(g))
}
