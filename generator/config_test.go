package generator_test

import (
	"errors"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// A value the config cannot use is named with its line, as the YAML
// parser's own errors and unknown keys are; a key the file lacks is named
// with the file alone.
func TestConfigErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"spec: openapi.yaml\noutput: {dir: gen}\nserver: fiber\n",
			"idemgen.yaml:3: server \"fiber\" is unknown; expected one of std-http, chi, echo, gin; see `idemgen help config`"},
		{"spec: openapi.yaml\noutput:\n  dir: gen\nmigrations:\n  format: flyway\n",
			"idemgen.yaml:5: migrations.format \"flyway\" is unknown; expected one of golang-migrate, goose, tern, dbmate; see `idemgen help config`"},
		{"spec: openapi.yaml\noutput:\n  dir: gen\n  package: my-gen\n",
			"idemgen.yaml:4: output.package \"my-gen\" is not a Go package name; set output.package; see `idemgen help config`"},
		{"output: {dir: gen}\n",
			"idemgen.yaml: spec is missing: name the annotated OpenAPI document, e.g. `spec: openapi.yaml`; see `idemgen help config`"},
	} {
		_, err := generator.ParseConfig("idemgen.yaml", []byte(tc.src))
		if err == nil || err.Error() != tc.want || !errors.Is(err, generator.ErrConfig) {
			t.Errorf("%q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
