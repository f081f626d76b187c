package generator

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// Config is idemgen's configuration file. Paths are relative to the file.
type Config struct {
	// Spec is the annotated OpenAPI 3 document.
	Spec string `yaml:"spec"`
	// Output is where the Go code goes.
	Output Output `yaml:"output"`
	// Server is the HTTP server kind the handler is built for.
	Server string `yaml:"server"`
	// Migrations are the key-store migrations written for the user's tool.
	Migrations Migrations `yaml:"migrations"`
	// Queries is where the key store's sqlc queries are written.
	Queries Queries `yaml:"queries"`
	// Client adds oapi-codegen's client and, over it, IdempotentClient:
	// a fresh key per call of an annotated operation, the same on retries.
	Client bool `yaml:"client"`
	// Tests adds the conformance helpers: package <package>test beside the
	// generated one, whose Check runs idem/idemtest's protocol checks on
	// every annotated operation of an implementation.
	Tests bool `yaml:"tests"`
	// OapiCodegen passes options through to oapi-codegen.
	OapiCodegen OapiCodegen `yaml:"oapi-codegen"`

	// dir is the directory of the config file; paths resolve against it.
	dir string
}

// Output says where the generated Go code goes.
type Output struct {
	Dir     string `yaml:"dir"`
	Package string `yaml:"package"`
	// Spec, when set, is where a copy of the spec that documents the
	// Idempotency-Key protocol is written, for clients and docs.
	Spec string `yaml:"spec"`
}

// Migrations say where and in which format the migrations are written.
type Migrations struct {
	Dir    string `yaml:"dir"`
	Format string `yaml:"format"`
	// Version, when set, is the first version of the migrations idemgen
	// has not written to Dir before; the next ones follow it. Zero numbers
	// them after the highest version in Dir, or, for dbmate, by the time.
	Version uint64 `yaml:"version"`

	// now gives dbmate's timestamps; nil is time.Now.
	now func() time.Time
}

// Queries say where the sqlc query file is written.
type Queries struct {
	Dir string `yaml:"dir"`
}

// OapiCodegen holds the oapi-codegen options idemgen passes through.
type OapiCodegen struct {
	// OutputOptions are oapi-codegen's output-options, such as skip-prune.
	OutputOptions codegen.OutputOptions `yaml:"output-options"`
}

// serverKinds are oapi-codegen's server generators that the layer mounts
// on.
var serverKinds = []string{"std-http", "chi", "echo", "gin"}

// Migration formats.
const (
	FormatGolangMigrate = "golang-migrate"
	FormatGoose         = "goose"
	FormatTern          = "tern"
	FormatDbmate        = "dbmate"
)

// migrationFormats are the migration tools idemgen writes files for.
var migrationFormats = []string{FormatGolangMigrate, FormatGoose, FormatTern, FormatDbmate}

// ErrConfig marks errors in the configuration file.
var ErrConfig = errors.New("invalid config")

// LoadConfig reads a configuration file and fills in defaults.
func LoadConfig(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseConfig(path, src)
}

// ParseConfig parses a configuration file's contents; path names it in
// errors and anchors its relative paths.
func ParseConfig(path string, src []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w: %v; see `idemgen help config`", path, ErrConfig, err)
	}
	c.dir = filepath.Dir(path)
	if err := c.complete(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrConfig, err)
	}
	return &c, nil
}

func (c *Config) complete() error {
	var problems []string
	if c.Spec == "" {
		problems = append(problems, "spec is missing: name the annotated OpenAPI document, e.g. `spec: openapi.yaml`")
	}
	if c.Output.Dir == "" {
		problems = append(problems, "output.dir is missing: name the directory for the generated Go code, e.g. `output: {dir: gen, package: gen}`")
	}
	if c.Output.Package == "" {
		c.Output.Package = filepath.Base(c.Output.Dir)
	}
	if c.Output.Dir != "" && !token.IsIdentifier(c.Output.Package) {
		problems = append(problems, fmt.Sprintf("output.package %q is not a Go package name; set output.package", c.Output.Package))
	}
	if c.Output.Spec != "" && c.Spec != "" && filepath.Clean(c.Output.Spec) == filepath.Clean(c.Spec) {
		problems = append(problems, fmt.Sprintf("output.spec %q is the input spec; name another file for the augmented copy, e.g. gen/openapi.yaml", c.Output.Spec))
	}
	if c.Server == "" {
		c.Server = "std-http"
	}
	switch {
	case slices.Contains(serverKinds, c.Server):
	default:
		problems = append(problems, fmt.Sprintf("server %q is unknown; expected one of %s", c.Server, strings.Join(serverKinds, ", ")))
	}
	if c.Migrations.Dir == "" {
		c.Migrations.Dir = filepath.Join(c.Output.Dir, "migrations")
	}
	if c.Migrations.Format == "" {
		c.Migrations.Format = FormatGolangMigrate
	}
	if !slices.Contains(migrationFormats, c.Migrations.Format) {
		problems = append(problems, fmt.Sprintf("migrations.format %q is unknown; expected one of %s", c.Migrations.Format, strings.Join(migrationFormats, ", ")))
	}
	if c.Queries.Dir == "" {
		c.Queries.Dir = filepath.Join(c.Output.Dir, "queries")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// path resolves a config-relative path.
func (c *Config) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// specFromOutput is the spec's path from the output directory, as the
// generated files' headers name it.
func (c *Config) specFromOutput() string {
	rel, err := filepath.Rel(c.path(c.Output.Dir), c.path(c.Spec))
	if err != nil {
		rel = c.Spec
	}
	return filepath.ToSlash(rel)
}
