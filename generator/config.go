package generator

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
	// Errors, when set, renders the answers the layer gives itself in the
	// API's own error schema instead of problem+json.
	Errors *Errors `yaml:"errors"`
	// Jobs is what runs the requests of async operations (mode: async):
	// JobsRiver, the default, or JobsNone, which refuses mode: async.
	Jobs string `yaml:"jobs"`

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
	// LockTimeout is the lock_timeout each generated migration sets for
	// its own transaction, a Go duration: the migration tools apply the
	// files without retries, so a migration behind a long transaction on
	// the key table fails after it, to be run again, rather than queue
	// every request behind its lock. Defaults to DefaultMigrationLockTimeout;
	// "0" leaves the session's own.
	LockTimeout string `yaml:"lock-timeout"`
	// River adds River's migrations (riverFiles); set for async operations.
	River bool `yaml:"-"`

	// now gives dbmate's timestamps; nil is time.Now.
	now func() time.Time
}

// DefaultMigrationLockTimeout is Migrations.LockTimeout's default.
const DefaultMigrationLockTimeout = 2 * time.Second

// lockTimeout is LockTimeout as PostgreSQL spells it: "2s", or ""
// for none.
func (m Migrations) lockTimeout() (string, error) {
	d := DefaultMigrationLockTimeout
	if m.LockTimeout != "" {
		var err error
		if d, err = time.ParseDuration(m.LockTimeout); err != nil || d < 0 || (d > 0 && d < time.Millisecond) {
			return "", fmt.Errorf("migrations.lock-timeout %q is not a duration of a millisecond or more, such as 2s; 0 leaves the session's lock_timeout", m.LockTimeout)
		}
	}
	switch {
	case d == 0:
		return "", nil
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second), nil
	}
	return fmt.Sprintf("%dms", d.Milliseconds()), nil
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

// What runs the requests of async operations (Config.Jobs).
const (
	JobsRiver = "river"
	JobsNone  = "none"
)

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

// MigrationFormats lists the migration tools idemgen writes files for.
func MigrationFormats() []string { return slices.Clone(migrationFormats) }

// ErrConfig marks errors in the configuration file.
var ErrConfig = errors.New("invalid config")

// configError is an error in the configuration file whose message names
// the file and line itself, without "invalid config".
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrConfig }

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
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		if m := yamlLineError.FindStringSubmatch(err.Error()); m != nil {
			return nil, &configError{fmt.Sprintf("%s:%s: %s; see `idemgen help config`", path, m[1], m[2])}
		}
		return nil, fmt.Errorf("%s: %w: %v; see `idemgen help config`", path, ErrConfig, err)
	}
	if problems := checkNode(&doc, reflect.TypeFor[Config](), ""); len(problems) > 0 {
		for i, p := range problems {
			problems[i] = fmt.Sprintf("%s:%s", path, p)
		}
		return nil, &configError{strings.Join(problems, "\n") + "; see `idemgen help config`"}
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, fmt.Errorf("%s: %w: %v; see `idemgen help config`", path, ErrConfig, err)
	}
	c.dir = filepath.Dir(path)
	if problems := c.complete(); len(problems) > 0 {
		// Each names its key first: the key's line, where the file has it.
		for i, p := range problems {
			key, _, _ := strings.Cut(p, " ")
			if n := valueNode(&doc, key); n != nil {
				problems[i] = fmt.Sprintf("%s:%d: %s", path, n.Line, p)
			} else {
				problems[i] = fmt.Sprintf("%s: %s", path, p)
			}
		}
		return nil, &configError{strings.Join(problems, "\n") + "; see `idemgen help config`"}
	}
	return &c, nil
}

// valueNode finds the value of the dotted key in a config document, or
// returns nil when the document does not have it.
func valueNode(n *yaml.Node, dotted string) *yaml.Node {
	for _, part := range strings.Split(dotted, ".") {
		for n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			n = n.Content[0]
		}
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// complete fills in defaults and returns what cannot work, each problem
// starting with its dotted key.
func (c *Config) complete() []string {
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
	if c.Jobs == "" {
		c.Jobs = JobsRiver
	}
	if c.Jobs != JobsRiver && c.Jobs != JobsNone {
		problems = append(problems, fmt.Sprintf("jobs %q is unknown; expected river (async operations run on River) or none (mode: async is refused)", c.Jobs))
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
	if _, err := c.Migrations.lockTimeout(); err != nil {
		problems = append(problems, err.Error())
	}
	if c.Queries.Dir == "" {
		c.Queries.Dir = filepath.Join(c.Output.Dir, "queries")
	}
	if c.Errors != nil {
		problems = append(problems, c.Errors.check()...)
	}
	return problems
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

// oapiFile is the path of oapi-codegen's output, as File.Path.
func (c *Config) oapiFile() string { return filepath.Join(c.Output.Dir, "oapi.gen.go") }

// yamlLineError is how the YAML parser words a syntax error.
var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// checkNode checks a config document, or a part of it at the dotted key
// where, against the Go type t it decodes into: every key must be one t
// has, and every value of the shape t wants. Each problem starts with its
// line and names keys as the file spells them, never Go types, which the
// YAML decoder's own errors name.
func checkNode(n *yaml.Node, t reflect.Type, where string) []string {
	if n = derefNode(n); n == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkFields(n, t, where)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nodeProblem(n, where, "expected a mapping")
		}
		var problems []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			problems = append(problems, checkNode(n.Content[i+1], t.Elem(), joinKey(where, n.Content[i].Value))...)
		}
		return problems
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nodeProblem(n, where, "expected a list, such as [a, b]")
		}
		var problems []string
		for i, e := range n.Content {
			problems = append(problems, checkNode(e, t.Elem(), where+"["+strconv.Itoa(i)+"]")...)
		}
		return problems
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		want := scalarWant(t.Kind())
		if n.Kind != yaml.ScalarNode {
			return nodeProblem(n, where, "expected %s", want)
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return nodeProblem(n, where, "%q is not %s", n.Value, want)
		}
	}
	return nil
}

// derefNode is the node n stands for, through documents and aliases; nil
// for an empty document.
func derefNode(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) == 0 {
			return nil
		} else {
			n = n.Content[0]
		}
	}
	return n
}

// nodeProblem is checkNode's problem with the value n at the dotted key
// where.
func nodeProblem(n *yaml.Node, where, format string, args ...any) []string {
	msg := fmt.Sprintf(format, args...)
	if where != "" {
		msg = where + ": " + msg
	}
	return []string{fmt.Sprintf("%d: %s", n.Line, msg)}
}

// checkFields checks the mapping n against the struct type t: its keys,
// those of the mappings it merges, and their values.
func checkFields(n *yaml.Node, t reflect.Type, where string) []string {
	keys, types := yamlFields(t)
	if n.Kind != yaml.MappingNode {
		return nodeProblem(n, where, "expected a mapping of %s", strings.Join(keys, ", "))
	}
	var problems []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" { // <<: *defaults, or <<: [*a, *b]
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, m := range merged {
				problems = append(problems, checkNode(m, t, where)...)
			}
			continue
		}
		ft, ok := types[k.Value]
		if !ok {
			problems = append(problems, unknownKey(k, where, keys))
			continue
		}
		problems = append(problems, checkNode(v, ft, joinKey(where, k.Value))...)
	}
	return problems
}

// unknownKey is the problem with a key the mapping at where does not
// have, which lists the keys it does.
func unknownKey(k *yaml.Node, where string, keys []string) string {
	msg := fmt.Sprintf("%d: unknown key %q", k.Line, k.Value)
	if where != "" {
		msg += " in " + where
	}
	msg += "; expected one of: " + strings.Join(keys, ", ")
	if c := closest(k.Value, keys); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return msg
}

// scalarWant says what a value of the scalar kind k must be.
func scalarWant(k reflect.Kind) string {
	want := map[reflect.Kind]string{reflect.Bool: "true or false", reflect.String: "a string", reflect.Float32: "a number", reflect.Float64: "a number"}[k]
	if want == "" {
		want = "a whole number"
		if k >= reflect.Uint && k <= reflect.Uint64 {
			want = "a whole number, 0 or more"
		}
	}
	return want
}

func joinKey(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// yamlFields lists the keys of a struct type in the order of its fields,
// and the type each decodes into, by yaml.v3's rules.
func yamlFields(t reflect.Type) (keys []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") && f.Type.Kind() == reflect.Struct {
			k, ts := yamlFields(f.Type)
			keys = append(keys, k...)
			maps.Copy(types, ts)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
		types[name] = f.Type
	}
	return keys, types
}

// closest is the one of keys that key is likely a misspelling of, or "".
func closest(key string, keys []string) string {
	best, bestDist := "", max(1, len(key)/3)+1
	for _, k := range keys {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
