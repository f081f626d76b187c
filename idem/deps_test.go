package idem_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The runtime is what services built with idemgen link: it must not pull
// in the generator or oapi-codegen, nor an OpenTelemetry SDK or exporter
// (idemotel uses the API alone, which is a no-op without one). Only
// idemvalidate, which checks requests against the spec, links
// kin-openapi's validator and what it needs to load a document; the rest
// of the runtime links no OpenAPI tooling at all. Only idemriver, which
// runs async operations, links River: an API without them compiles none
// of it.
func TestRuntimeDependencies(t *testing.T) {
	banned := []string{"github.com/idemgen/idemgen/generator", "github.com/oapi-codegen/oapi-codegen", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus"}
	const validator = "github.com/idemgen/idemgen/idem/idemvalidate"
	const riverPkg = "github.com/idemgen/idemgen/idem/idemriver"
	check := func(pkgs []string, banned []string) {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s depends on %s", strings.Join(pkgs, " "), dep)
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "github.com/idemgen/idemgen/idem/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var runtime []string
	for _, p := range strings.Fields(string(out)) {
		if p != validator && p != riverPkg {
			runtime = append(runtime, p)
		}
	}
	check(runtime, append(banned, "github.com/getkin/kin-openapi", "gopkg.in/yaml", validator, "github.com/riverqueue", riverPkg))
	check([]string{validator}, append(banned, "github.com/riverqueue"))
	check([]string{riverPkg}, append(banned, "github.com/getkin/kin-openapi", validator))
}
