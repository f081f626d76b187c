package generator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemgen/idemgen/generator/annotation"
	"golang.org/x/mod/modfile"
	"gopkg.in/yaml.v3"
)

// Request is everything one generation reads. Load builds it from the
// files a config names; a test can build it in memory. Generate reads
// nothing else, so the same request always gives the same result.
type Request struct {
	Config *Config
	// Spec is the text of the spec Config.Spec names.
	Spec []byte
	// Refs are the local files the spec's $refs name, and theirs, by
	// their path (the referring file's directory joined to the
	// reference's file part, cleaned). A reference to a file missing
	// here names a file that cannot be read, with the error in RefErrs
	// when Load met one.
	Refs    map[string][]byte
	RefErrs map[string]error
	// Layer is the idempotency layer file this generation replaces, for
	// the warnings about keys in flight whose contract changes; nil
	// when there is none.
	Layer []byte
	// Migrations is what the migration folder holds already.
	Migrations []MigrationFile
	// OutputImport is the Go import path of the output directory, which
	// the conformance kit (tests: true) imports it by; "" when no module
	// holds it.
	OutputImport string
	// OapiCodegen is the version of oapi-codegen that generates, which
	// the header of its file names; "" names it "v2".
	OapiCodegen string
}

// MigrationFile is a file of the migration folder: its name and its
// first line, which says whether idemgen wrote it.
type MigrationFile struct {
	Name, FirstLine string
}

// Load reads what cfg's generation needs: the spec and the files its
// references name, the layer file it replaces, the migration folder's
// files and the module that holds the output.
func Load(cfg *Config) (Request, error) {
	req := Request{Config: cfg, OapiCodegen: oapiCodegenVersion()}
	specPath := cfg.path(cfg.Spec)
	var err error
	if req.Spec, err = os.ReadFile(specPath); err != nil {
		return Request{}, fmt.Errorf("read spec: %w", err)
	}
	req.Refs, req.RefErrs = readRefs(specPath, req.Spec)
	// No layer file, or one that cannot be read, has no contract to
	// compare with.
	req.Layer, _ = os.ReadFile(cfg.path(filepath.Join(cfg.Output.Dir, layerFile)))
	if req.Migrations, err = ReadMigrationFolder(filepath.Join(cfg.dir, cfg.Migrations.Dir)); err != nil {
		return Request{}, err
	}
	if cfg.Tests {
		if req.OutputImport, err = importPath(cfg.path(cfg.Output.Dir)); err != nil {
			return Request{}, err
		}
	}
	return req, nil
}

// readRefs reads the local files that the spec at specPath references,
// and those they reference in turn. A file that cannot be read or parsed
// is left for the loader and the reference check to report.
func readRefs(specPath string, src []byte) (map[string][]byte, map[string]error) {
	refs, errs := map[string][]byte{}, map[string]error{}
	if onlyLocalRefs(src) {
		return refs, errs // most specs: no parse needed to know
	}
	var visit func(file string, src []byte)
	visit = func(file string, src []byte) {
		doc, err := annotation.Parse(file, src)
		if err != nil {
			return
		}
		for _, target := range fileRefs(doc) {
			path := filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(target)))
			if _, seen := refs[path]; seen || errs[path] != nil {
				continue
			}
			data, err := os.ReadFile(path)
			if err != nil {
				errs[path] = err
				continue
			}
			refs[path] = data
			visit(path, data)
		}
	}
	visit(specPath, src)
	return refs, errs
}

// onlyLocalRefs is whether src's text shows that it references no other
// file: each $ref in it is a key whose value starts with '#'. Parsing a
// large spec costs tens of milliseconds; where the text leaves a doubt
// (a value that names a file, a $ref not followed by a colon, an escape
// that may spell one), the caller parses it.
func onlyLocalRefs(src []byte) bool {
	for _, escape := range []string{`\u0024`, `\x24`, `\U00000024`} {
		if bytes.Contains(src, []byte(escape)) {
			return false
		}
	}
	key := []byte("$ref")
	for rest := src; ; {
		i := bytes.Index(rest, key)
		if i < 0 {
			return true
		}
		rest = rest[i+len(key):]
		rest = bytes.TrimLeft(rest, `'"`)
		rest = bytes.TrimLeft(rest, " \t")
		if len(rest) == 0 || rest[0] != ':' {
			return false
		}
		rest = bytes.TrimLeft(rest[1:], " \t")
		rest = bytes.TrimLeft(rest, `'"`)
		if len(rest) == 0 || rest[0] != '#' {
			return false
		}
	}
}

// fileRefs are the file parts of the local-file $refs under n.
func fileRefs(n *yaml.Node) []string {
	var out []string
	eachRef(n, func(v *yaml.Node) {
		if target, _, _ := strings.Cut(v.Value, "#"); target != "" && !strings.Contains(target, "://") {
			out = append(out, target)
		}
	})
	return out
}

// ref returns the referenced file at path, as Load read it, or the error
// reading it gave.
func (r *Request) ref(path string) ([]byte, error) {
	path = filepath.Clean(path)
	if data, ok := r.Refs[path]; ok {
		return data, nil
	}
	if r.Config != nil && path == filepath.Clean(r.Config.path(r.Config.Spec)) {
		return r.Spec, nil // a file that refers back to the spec
	}
	if err := r.RefErrs[path]; err != nil {
		return nil, err
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

// readRef serves the spec loader's reads of local files from the request.
// Remote references are refused: generation must not depend on the
// network.
func (r *Request) readRef(location *url.URL) ([]byte, error) {
	if location.Scheme != "" || location.Host != "" {
		doc := *location
		doc.Fragment, doc.RawFragment = "", ""
		return nil, fmt.Errorf("remote reference %q: idemgen reads local files only, so that generation does not depend on the network; save the document beside the spec and refer to it by its path", doc.String())
	}
	return r.ref(filepath.FromSlash(location.Path))
}

// ReadMigrationFolder lists the numbered SQL files of the migration
// folder dir, with their first lines; nothing when it does not exist.
func ReadMigrationFolder(dir string) ([]MigrationFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the migrations directory: %w", err)
	}
	var files []MigrationFile
	for _, e := range entries {
		if _, ok := migrationVersion(e.Name()); e.IsDir() || !ok {
			continue
		}
		first, err := firstLine(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read the migrations directory: %w", err)
		}
		files = append(files, MigrationFile{Name: e.Name(), FirstLine: first})
	}
	return files, nil
}

// importPath is the Go import path of the directory dir, from the go.mod
// of the module that holds it; "" when none does.
func importPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		src, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			mod := modfile.ModulePath(src)
			if mod == "" {
				return "", fmt.Errorf("%s has no module line", filepath.Join(d, "go.mod"))
			}
			rel, err := filepath.Rel(d, abs)
			if err != nil || rel == "." {
				return mod, err
			}
			return mod + "/" + filepath.ToSlash(rel), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if filepath.Dir(d) == d {
			return "", nil
		}
	}
}
