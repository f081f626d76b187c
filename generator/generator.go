package generator

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// File is one generated file.
type File struct {
	// Path is relative to the config file's directory.
	Path    string
	Content []byte
	// Migration marks a migration, the key store's or River's, which a
	// deployment must apply before a binary built from the new output
	// serves.
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

// Generate produces every output file in memory from what req holds,
// reading nothing else; Write or Check them. Its stages run in the order
// the package doc's map gives, each on what the ones before it made.
func Generate(req Request) (*Result, error) {
	src, err := readSource(&req, pathsOf(req.Config))
	if err != nil {
		return nil, err
	}
	m, err := buildModel(req.Config, src)
	if err != nil {
		return nil, err
	}
	m.Warnings = withResolutions(src.paths.spec, src.oapi.warnings, m.Warnings)
	if err := completeModel(src, m); err != nil {
		return nil, err
	}
	var augmented []byte
	if src.paths.augmented != "" {
		var found []resolution
		if augmented, found, err = augmentSpec(src.paths.spec, req.Spec, m, src.oapi.carry); err != nil {
			return nil, err
		}
		m.Warnings = withResolutions(src.paths.spec, m.Warnings, resolutionWarnings(src.paths.spec, found))
	}
	files, err := renderFiles(&req, src, m)
	if err != nil {
		return nil, err
	}
	if augmented != nil {
		files = append(files, File{Path: src.paths.augmented, Content: augmented})
	}
	warnings := slices.Concat(m.Warnings, changedKeys(req.Layer, src.paths.layer, m))
	mig := req.Config.Migrations
	mig.River = m.Async
	migrations, stale, err := sqlFiles(mig, src.paths.queries, req.Migrations)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Files:      append(files, migrations...),
		Stale:      stale,
		Operations: len(m.Operations),
		Warnings:   warnings,
		model:      m,
	}
	for _, op := range m.Operations {
		if op.Idempotent {
			res.Idempotent++
		}
	}
	return res, nil
}

// changedKeys warns of the keys in flight that this generation would
// change, by the contract of the layer file it replaces, in the order of
// the spec's text.
func changedKeys(layer []byte, layerPath string, m *model) []string {
	changed := contractWarnings(layer, layerPath, m, m.contracts)
	slices.SortStableFunc(changed, func(a, b warning) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Column, b.pos.Column))
	})
	var texts []string
	for _, w := range changed {
		texts = append(texts, w.text)
	}
	return texts
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
	// Migrations are the new migrations among them, the key store's and
	// River's: those a deployment must apply before the new output serves.
	Migrations []string
}

func (e *StaleError) Error() string {
	msg := ErrStale.Error() + ":"
	for _, f := range e.Files {
		msg += "\n\t" + f
	}
	msg += "\nrun `go generate` (or `idemgen generate`) and commit the result"
	if len(e.Migrations) > 0 {
		msg += fmt.Sprintf("; %d of them are new migrations, the key store's or River's: apply them (`idemgen migrate up`, with -river for River's; pgstore.Migrate and idemriver.Migrate; or your migration tool) before a binary built from the new output serves, as docs/UPGRADING.md says", len(e.Migrations))
	}
	return msg
}

func (e *StaleError) Is(target error) bool { return target == ErrStale }
