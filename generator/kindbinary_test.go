package generator_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// Four specs are generated for each server kind and run over HTTP: the
// example's (testdata/kinds-<kind>), testdata/keyplacement,
// testdata/inputs and testdata/exports. Linking a test binary costs more than compiling the
// generated code, so the three go in one binary per kind: each generated
// package in a folder of its own, with its suite beside it as ordinary
// files, and a test package above them whose tests call the suites'
// (TestKinds_Protocol calls the kinds package's TestProtocol).

// suitePackage is one generated package of a kind's test binary.
type suitePackage struct {
	dir    string // its folder in the binary's package, and its prefix there
	prefix string // of the runner's test names: Test<prefix>_<name>
	res    *generator.Result
	// kitFrom is the path the conformance helpers (tests: true) import
	// the generated package by; "" when there are none.
	kitFrom string
	suite   map[string]string // files of the package, by name
	// external are tests of an external package, importing the
	// generated package as PKG and its helpers as PKG/kindstest.
	external []string
}

var (
	testFunc    = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	testMain    = regexp.MustCompile(`(?m)^func TestMain\(m \*testing\.M\).*$`)
	packageLine = regexp.MustCompile(`(?m)^package \w+`)
)

// kindBinary is the test binary of kind's four generated packages.
func kindBinary(t *testing.T, kind string) string {
	return buildTestBinary(t, "kind-"+kind, func(t *testing.T) string {
		kindsRes := generate(t, loadConfig(t, filepath.Join("testdata", "kinds-"+kind, "idemgen.yaml")))
		placementCfg := loadConfig(t, filepath.Join("testdata", "keyplacement", "idemgen.yaml"))
		placementCfg.Server = kind
		inputsCfg := configFor(t, filepath.Join("testdata", "inputs"), "openapi.yaml", "server: "+kind+"\n")
		exportsCfg := loadConfig(t, filepath.Join("testdata", "exports", "idemgen.yaml"))
		exportsCfg.Server = kind
		return writeKindPackages(t, []suitePackage{{
			dir:      "kinds",
			prefix:   "Kinds",
			res:      kindsRes,
			kitFrom:  "github.com/idemgen/idemgen/generator/testdata/kinds-" + kind + "/gen",
			suite:    map[string]string{"mount.go": mounts[kind], "protocol.go": protocolSuite},
			external: []string{conformanceTest},
		}, {
			dir:      "keyplacement",
			prefix:   "Placement",
			res:      generate(t, placementCfg),
			kitFrom:  "github.com/idemgen/idemgen/generator/testdata/keyplacement/gen",
			suite:    map[string]string{"mount.go": mounts[kind], "mount_pg.go": pgMount(mounts[kind]), "placement.go": placementSuite},
			external: []string{placementConformance},
		}, {
			dir:    "inputs",
			prefix: "Inputs",
			res:    generate(t, inputsCfg),
			suite:  map[string]string{"mount.go": inputsMounts[kind], "inputs.go": inputsSuite},
		}, {
			dir:    "exports",
			prefix: "Async",
			res:    generate(t, exportsCfg),
			suite:  map[string]string{"mount.go": asyncMounts[kind], "async.go": asyncSuite},
		}})
	})
}

// writeKindPackages writes the packages under a fresh package of the
// module, with the runner, and returns its path for the go command.
func writeKindPackages(t *testing.T, pkgs []suitePackage) string {
	t.Helper()
	root, err := os.MkdirTemp("testdata", "compile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	rootPath := "github.com/idemgen/idemgen/generator/" + filepath.ToSlash(root)
	imports := []string{`"testing"`, `"github.com/idemgen/idemgen/internal/pgtest"`}
	var tests []string
	for _, p := range pkgs {
		dir := filepath.Join(root, p.dir)
		path := rootPath + "/" + p.dir
		for _, f := range p.res.Files {
			if !strings.HasSuffix(f.Path, ".go") {
				continue
			}
			if strings.HasSuffix(f.Path, "conformance.gen.go") {
				from, to := []byte(`"`+p.kitFrom+`"`), []byte(`"`+path+`"`)
				if p.kitFrom == "" || !bytes.Contains(f.Content, from) {
					t.Fatalf("the conformance helpers of %s do not import %s", p.dir, from)
				}
				writeFile(t, filepath.Join(dir, "kindstest", "conformance.gen.go"), bytes.ReplaceAll(f.Content, from, to))
				continue
			}
			writeFile(t, filepath.Join(dir, filepath.Base(f.Path)), f.Content)
		}
		names := slices.Sorted(func(yield func(string) bool) {
			for name := range p.suite {
				if !yield(name) {
					return
				}
			}
		})
		imports = append(imports, fmt.Sprintf("%s %q", p.dir, path))
		for _, name := range names {
			// The runner's TestMain starts the database for all of them.
			src := testMain.ReplaceAllString(p.suite[name], "")
			writeFile(t, filepath.Join(dir, name), []byte(src))
			for _, m := range testFunc.FindAllStringSubmatch(src, -1) {
				tests = append(tests, fmt.Sprintf("func Test%s_%s(t *testing.T) { %s.%s(t) }", p.prefix, strings.TrimPrefix(m[1], "Test"), p.dir, m[1]))
			}
		}
		for i, src := range p.external {
			src = strings.ReplaceAll(src, "PKG", strings.TrimPrefix(path, "github.com/idemgen/idemgen/generator/"))
			src = packageLine.ReplaceAllString(src, "package kindsuite_test")
			src = testFunc.ReplaceAllString(src, "func Test"+p.prefix+"_${1}(t *testing.T)")
			src = strings.ReplaceAll(src, "func Test"+p.prefix+"_Test", "func Test"+p.prefix+"_")
			writeFile(t, filepath.Join(root, fmt.Sprintf("%s_external%d_test.go", p.dir, i)), []byte(src))
		}
	}
	sort.Strings(tests)
	runner := "package kindsuite_test\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n" +
		"func TestMain(m *testing.M) { pgtest.Main(m) }\n\n" + strings.Join(tests, "\n") + "\n"
	writeFile(t, filepath.Join(root, "runner_test.go"), []byte(runner))
	return "./" + filepath.ToSlash(root)
}
