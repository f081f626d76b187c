// Package realspecs finds the corpus of real public OpenAPI specs that the
// generator's tests run over. The corpus is not part of the repository:
// the IDEMGEN_SPECS environment variable names its directory, and .ci/run
// sets it, so that the test suite passes on a fresh clone with nothing
// beside it.
package realspecs

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the corpus directory, which holds INDEX.tsv.
const EnvVar = "IDEMGEN_SPECS"

// Dir returns the corpus directory, as an absolute path. Without
// IDEMGEN_SPECS the test is skipped, saying how to run it; under CI (CI
// set), where the corpus must run, it fails instead.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvVar)
	if dir == "" {
		const how = "set it to the corpus directory (the one with INDEX.tsv), e.g. " + EnvVar + "=$PWD/../shared/specs from the repository root, as .ci/run does"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI must run the real-spec tests: %s", EnvVar, how)
		}
		t.Skipf("%s is not set, so the real-spec tests do not run: %s", EnvVar, how)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("%s=%s: %v", EnvVar, dir, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "INDEX.tsv")); err != nil {
		t.Fatalf("%s=%s holds no INDEX.tsv: %v", EnvVar, dir, err)
	}
	return abs
}
