// Package generator turns an annotated OpenAPI spec and a Config into
// idemgen's output: oapi-codegen's models and strict server, the
// idempotency layer over them, the key-store migrations and the sqlc
// queries. Load reads what a generation needs into a Request (request.go);
// Generate, which reads nothing else, reads the spec's annotations
// (annotation), builds a model of the annotated operations on
// oapi-codegen's own operation definitions (model.go), and renders the
// embedded templates. Result.Write and Result.Check are the only writes.
package generator

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"text/template"

	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/templates"
)

// File is one generated file.
type File struct {
	// Path is relative to the config file's directory.
	Path    string
	Content []byte
	// Migration marks a key-store migration, which a deployment must
	// apply before a binary built from the new output serves.
	Migration bool
}

// Result is the output of one run.
type Result struct {
	Files []File
	// Stale lists files idemgen wrote before that the output no longer
	// has, such as migrations in a format used before; paths as in File.
	Stale []string
	// Operations counts the spec's operations; Idempotent the annotated ones.
	Operations, Idempotent int
	// Warnings are problems that do not stop generation, each
	// "file:line:col: warning: ...", in the order of the spec's text.
	Warnings []string

	model *model // for the tests of the fingerprint writers
}

// layerFile is the name of the idempotency layer's file in the output
// directory.
const layerFile = "idempotency.gen.go"

// tmpl holds the templates, with the functions that write the model's
// typed values as Go or as the docs write them.
var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"goDuration":   durationExpr,
	"durationText": durationText,
}).ParseFS(templates.FS, "*.tmpl"))

// Generate produces every output file in memory from what req holds,
// reading nothing else; Write or Check them.
func Generate(req Request) (*Result, error) {
	cfg := req.Config
	specPath := cfg.path(cfg.Spec)
	src := req.Spec
	// Reading the annotations parses the whole spec, which oapi-codegen
	// does not need: it is read while oapi-codegen loads the spec, on
	// another core where there is one. Its errors come first, as when it
	// was read before.
	var annotated []annotation.Operation
	var readErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		if annotated, readErr = annotation.Read(specPath, src); readErr == nil && cfg.Errors != nil {
			readErr = errorSchemaOf(specPath, src, cfg.Errors, req.ref)
		}
	}()
	readDone := func() error {
		<-read
		return readErr
	}
	oapi, err := runOapiCodegen(&req, readDone)
	if err := readDone(); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	m, err := buildModel(cfg, annotated, oapi.defs, oapi.security)
	if err != nil {
		return nil, err
	}
	m.Warnings = withResolutions(specPath, oapi.warnings, m.Warnings)
	// oapi-codegen's output is parsed once, for every check of it.
	scan := oapi.scan
	if scan == nil {
		_, err := scanNames("oapi.gen.go", oapi.src)
		return nil, err
	}
	if err := checkNames(specPath, scan, m); err != nil {
		return nil, err
	}
	if err := writeFingerprints(scan.file, m); err != nil {
		return nil, err
	}
	schemas, warnings, err := requestSchemas(specPath, oapi.version, m.Operations)
	if err != nil {
		return nil, err
	}
	m.RequestSchemas, m.Warnings = goString(schemas), append(m.Warnings, warnings...)
	var augmented []byte
	if cfg.Output.Spec != "" {
		var found []resolution
		if augmented, found, err = augmentSpec(specPath, src, m, oapi.carry); err != nil {
			return nil, err
		}
		m.Warnings = withResolutions(specPath, m.Warnings, resolutionWarnings(specPath, found))
	}
	mount, err := render(mountTemplate(cfg.Server), m)
	if err != nil {
		return nil, err
	}
	m.Mount = string(mount)
	layer, err := renderGo("idempotency.go.tmpl", m)
	if err != nil {
		return nil, err
	}
	res := &Result{Operations: len(m.Operations), Warnings: m.Warnings, model: m}
	// Keys in flight that this generation would change: compared with the
	// contract of the file it replaces.
	changed := contractWarnings(req.Layer, filepath.Join(cfg.Output.Dir, layerFile), m, m.contracts)
	slices.SortStableFunc(changed, func(a, b warning) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Column, b.pos.Column))
	})
	for _, w := range changed {
		res.Warnings = append(res.Warnings, w.text)
	}
	for _, op := range m.Operations {
		if op.Idempotent {
			res.Idempotent++
		}
	}
	res.Files = append(res.Files,
		File{Path: cfg.oapiFile(), Content: oapi.src},
		File{Path: filepath.Join(cfg.Output.Dir, layerFile), Content: layer},
	)
	if m.Client && m.Idempotent {
		client, err := renderGo("client.go.tmpl", m)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, File{Path: filepath.Join(cfg.Output.Dir, "idempotency_client.gen.go"), Content: client})
	}
	if res.Files, err = finishGoFiles(specPath, src, m, res.Files, scan); err != nil {
		return nil, err
	}
	if m.Tests && m.Idempotent {
		dir, name := kitPackage(cfg)
		m.KitPackage = name
		if m.Import = req.OutputImport; m.Import == "" {
			return nil, fmt.Errorf("%w: tests: true needs output.dir (%s) inside a Go module, to import it from the test helpers; none of its parents has a go.mod", ErrConfig, cfg.path(cfg.Output.Dir))
		}
		kit, err := renderGo("kit.go.tmpl", m)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, File{Path: filepath.Join(dir, "conformance.gen.go"), Content: kit})
	}
	if cfg.Output.Spec != "" {
		res.Files = append(res.Files, File{Path: cfg.Output.Spec, Content: augmented})
	}
	sqlFiles, stale, err := sqlFiles(cfg, req.Migrations)
	if err != nil {
		return nil, err
	}
	res.Files = append(res.Files, sqlFiles...)
	res.Stale = stale
	return res, nil
}

// mountTemplate is the template of the code that mounts the layer on the
// server kind's router.
func mountTemplate(server string) string {
	switch server {
	case "echo", "gin":
		return "mount-" + server + ".go.tmpl"
	}
	return "mount-http.go.tmpl" // std-http and chi: an http.Handler
}

func renderGo(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	out, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format %s (a generator bug; please report it with your spec): %w", name, err)
	}
	return out, nil
}

// Write writes the files under dir (the config file's directory), leaving
// files whose content is unchanged untouched. It returns the paths it
// wrote, joined to dir so they are relative to where the user runs it.
func (r *Result) Write(dir string) (written []string, err error) {
	for _, f := range r.Files {
		path := filepath.Join(dir, f.Path)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.Content) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, fmt.Errorf("write output: %w", err)
		}
		if err := os.WriteFile(path, f.Content, 0o644); err != nil {
			return written, fmt.Errorf("write output: %w", err)
		}
		written = append(written, path)
	}
	for _, f := range r.Stale {
		path := filepath.Join(dir, f)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return written, fmt.Errorf("remove a stale file: %w", err)
		}
		written = append(written, path+" (removed)")
	}
	return written, nil
}

// ErrStale reports committed output that differs from what the spec and
// config generate.
var ErrStale = errors.New("generated files are out of date")

// Check compares the files with what is under dir. It returns ErrStale,
// naming every missing or differing file (joined to dir), when they are
// not the same.
func (r *Result) Check(dir string) error {
	var stale, migrations []string
	for _, f := range r.Files {
		path := filepath.Join(dir, f.Path)
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			stale = append(stale, path+" (missing)")
			// A changed migration file was applied already, under its
			// number; only a new one must be applied.
			if f.Migration {
				migrations = append(migrations, path)
			}
		case err != nil:
			return fmt.Errorf("check output: %w", err)
		case !bytes.Equal(old, f.Content):
			stale = append(stale, path+" (differs)")
		}
	}
	for _, f := range r.Stale {
		stale = append(stale, filepath.Join(dir, f)+" (idemgen's, and no longer generated: remove it)")
	}
	if len(stale) == 0 {
		return nil
	}
	slices.Sort(stale)
	slices.Sort(migrations)
	return &StaleError{Files: stale, Migrations: migrations}
}

// StaleError lists the stale files; it matches ErrStale.
type StaleError struct {
	Files []string
	// Migrations are the new key-store migrations among them: those a
	// deployment must apply before the new output serves.
	Migrations []string
}

func (e *StaleError) Error() string {
	msg := ErrStale.Error() + ":"
	for _, f := range e.Files {
		msg += "\n\t" + f
	}
	msg += "\nrun `go generate` (or `idemgen generate`) and commit the result"
	if len(e.Migrations) > 0 {
		msg += fmt.Sprintf("; %d of them are new key-store migrations: apply them (`idemgen migrate up`, pgstore.Migrate, or your migration tool) before a binary built from the new output serves, as docs/UPGRADING.md says", len(e.Migrations))
	}
	return msg
}

func (e *StaleError) Is(target error) bool { return target == ErrStale }
