package idem_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The runtime is what services built with idemgen link: it must not pull
// in the generator or its OpenAPI tooling, nor an OpenTelemetry SDK or
// exporter (idemotel uses the API alone, which is a no-op without one).
func TestRuntimeDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/idemgen/idemgen/idem/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/idemgen/idemgen/generator", "github.com/oapi-codegen/oapi-codegen", "github.com/getkin/kin-openapi", "gopkg.in/yaml", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the runtime depends on %s", dep)
			}
		}
	}
}
