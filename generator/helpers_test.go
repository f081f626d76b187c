package generator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// goldenCases returns the directories under testdata that hold an
// idemgen.yaml: one golden case each.
func goldenCases(t *testing.T) []string {
	t.Helper()
	configs, err := filepath.Glob(filepath.Join("testdata", "*", "idemgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, c := range configs {
		dir := filepath.Dir(c)
		if strings.HasPrefix(filepath.Base(dir), "compile-") {
			continue // a compile test's leftover
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		t.Fatal("no golden cases under testdata")
	}
	return dirs
}

func loadConfig(t *testing.T, path string) *generator.Config {
	t.Helper()
	cfg, err := generator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// configFor parses a config for the spec at specPath, as if the config
// file were dir/idemgen.yaml; extra is appended to it.
func configFor(t *testing.T, dir, specPath, extra string) *generator.Config {
	t.Helper()
	src := "spec: " + specPath + "\noutput:\n  dir: gen\n  package: gen\n" + extra
	cfg, err := generator.ParseConfig(filepath.Join(dir, "idemgen.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// generateFrom loads what cfg names and generates it, as the command does.
func generateFrom(cfg *generator.Config) (*generator.Result, error) {
	req, err := generator.Load(cfg)
	if err != nil {
		return nil, err
	}
	return generator.Generate(req)
}

func generate(t *testing.T, cfg *generator.Config) *generator.Result {
	t.Helper()
	res, err := generateFrom(cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return res
}

// writeFile writes content to path, making its directory.
func writeFile(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// compileGo writes the generated Go files into a fresh package directory
// inside the module and type-checks and vets it.
func compileGo(t *testing.T, res *generator.Result) {
	t.Helper()
	vetGo(t, writeGoPackage(t, res, nil), "")
}

// writeGoPackage writes the generated Go files, and the extra files by
// name, into a fresh package directory inside the module, so that their
// imports resolve through its go.mod. It returns the package's path for
// the go command, "./testdata/compile-...".
func writeGoPackage(t *testing.T, res *generator.Result, extra map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("testdata", "compile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := 0
	for _, f := range res.Files {
		// The conformance helpers are a package of their own, importing
		// this one by its generated path; TestServerKinds runs them.
		if strings.HasSuffix(f.Path, ".go") && !strings.HasSuffix(f.Path, "conformance.gen.go") {
			writeFile(t, filepath.Join(dir, filepath.Base(f.Path)), f.Content)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no Go files generated")
	}
	for name, content := range extra {
		writeFile(t, filepath.Join(dir, name), []byte(content))
	}
	return "./" + filepath.ToSlash(dir)
}

// runGo runs the go command and returns its combined output.
func runGo(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to compile the generated code: %v", err)
	}
	return exec.Command(goTool, args...).CombinedOutput()
}

// runGenerated generates the test case in testdata/<name> and runs
// tests, a Go test file written into the generated package, with go test.
func runGenerated(t *testing.T, name, tests string) {
	t.Helper()
	res := generate(t, loadConfig(t, filepath.Join("testdata", name, "idemgen.yaml")))
	goTest(t, writeGoPackage(t, res, map[string]string{name + "_run_test.go": tests}))
}
