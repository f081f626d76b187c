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
)

// Generating twice must give the same files, byte for byte, in the same
// order.
func TestGenerateIsDeterministic(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg := loadConfig(t, filepath.Join(dir, "idemgen.yaml"))
			first, second := generate(t, cfg), generate(t, cfg)
			if len(first.Files) != len(second.Files) {
				t.Fatalf("%d files, then %d", len(first.Files), len(second.Files))
			}
			for i, f := range first.Files {
				g := second.Files[i]
				if f.Path != g.Path || !bytes.Equal(f.Content, g.Content) {
					t.Errorf("file %d: %s, then %s: %s", i, f.Path, g.Path, firstDiff(f.Content, g.Content))
				}
			}
			if first.Operations != second.Operations || first.Idempotent != second.Idempotent {
				t.Errorf("counts %d/%d, then %d/%d", first.Operations, first.Idempotent, second.Operations, second.Idempotent)
			}
		})
	}
}

// copyCase copies a golden case's config and spec into a temporary
// directory and returns the config loaded from there.
func copyCase(t *testing.T, name string) (dir string, cfg *generator.Config) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"idemgen.yaml", "openapi.yaml"} {
		src, err := os.ReadFile(filepath.Join("testdata", name, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), src)
	}
	return dir, loadConfig(t, filepath.Join(dir, "idemgen.yaml"))
}

func TestWriteThenCheck(t *testing.T) {
	dir, cfg := copyCase(t, "orders")
	res := generate(t, cfg)
	written, err := res.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(res.Files) {
		t.Fatalf("wrote %v, want all %d files", written, len(res.Files))
	}
	if err := res.Check(dir); err != nil {
		t.Fatalf("Check right after Write: %v", err)
	}

	// A fresh run checks against what the first one wrote.
	if err := generate(t, cfg).Check(dir); err != nil {
		t.Fatalf("Check of a second run: %v", err)
	}

	// One byte changed: only that file differs.
	edited := filepath.Join("gen", "idempotency.gen.go")
	path := filepath.Join(dir, edited)
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(content, []byte("package"))
	content[i] = 'P'
	writeFile(t, path, content)
	err = res.Check(dir)
	wantStale(t, err, path+" (differs)")

	// A missing file is named as missing, beside the edited one.
	removed := filepath.Join("gen", "queries", "idempotency_keys.sql")
	if err := os.Remove(filepath.Join(dir, removed)); err != nil {
		t.Fatal(err)
	}
	err = res.Check(dir)
	wantStale(t, err, path+" (differs)", filepath.Join(dir, removed)+" (missing)")
	if !strings.Contains(err.Error(), "idemgen generate") {
		t.Errorf("the error does not say how to fix it: %v", err)
	}
	if strings.Contains(err.Error(), "migrate up") {
		t.Errorf("the error asks for migrations when none changed: %v", err)
	}

	// Write rewrites exactly the stale files, after which Check passes.
	written, err = res.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(written)
	if want := []string{path, filepath.Join(dir, removed)}; !slices.Equal(written, want) {
		t.Errorf("Write rewrote %v, want %v", written, want)
	}
	if err := res.Check(dir); err != nil {
		t.Errorf("Check after rewriting: %v", err)
	}
}

// A new migration in the output is stale output that a deployment must
// apply before the new binary serves: Check names it and says so.
func TestCheckNamesNewMigrations(t *testing.T) {
	dir, cfg := copyCase(t, "orders")
	res := generate(t, cfg)
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "gen", "migrations", "*.up.sql"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no migrations written (%v)", err)
	}
	slices.Sort(matches)
	newest := matches[len(matches)-1]
	if err := os.Remove(newest); err != nil {
		t.Fatal(err)
	}
	err = res.Check(dir)
	wantStale(t, err, newest+" (missing)")
	var stale *generator.StaleError
	errors.As(err, &stale)
	if !slices.Equal(stale.Migrations, []string{newest}) {
		t.Errorf("Migrations = %q, want %q", stale.Migrations, newest)
	}
	for _, want := range []string{"new migrations", "idemgen migrate up", "before a binary built from the new output serves", "docs/UPGRADING.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// wantStale checks that err is an ErrStale naming exactly files, in
// order.
func wantStale(t *testing.T, err error, files ...string) {
	t.Helper()
	if !errors.Is(err, generator.ErrStale) {
		t.Fatalf("Check: got %v, want an error matching ErrStale", err)
	}
	var stale *generator.StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("Check: got %T, want *StaleError", err)
	}
	if !slices.Equal(stale.Files, files) {
		t.Errorf("stale files %q, want %q", stale.Files, files)
	}
	for _, f := range files {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("the message does not name %s:\n%v", f, err)
		}
	}
}
