package generator

import (
	"bytes"
	"fmt"
	"go/format"
	"text/template"

	"github.com/idemgen/idemgen/templates"
)

// tmpl holds the templates, with the functions that write the model's
// typed values as Go or as the docs write them.
var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"goDuration":   durationExpr,
	"durationText": durationText,
	"goString":     goString,
}).ParseFS(templates.FS, "*.tmpl"))

// renderFiles renders the Go files of the output from the model:
// oapi-codegen's file as it made it, the layer, and the retrying client
// and the conformance helpers when the config asks for them, checked to
// compile as far as parsing tells (finishGoFiles).
func renderFiles(req *Request, src source, m *model) ([]File, error) {
	layer, err := renderGo("idempotency.go.tmpl", m)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: src.paths.oapi, Content: src.oapi.src},
		{Path: src.paths.layer, Content: layer},
	}
	if m.Client && m.Idempotent {
		client, err := renderGo("client.go.tmpl", m)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: src.paths.client, Content: client})
	}
	if files, err = finishGoFiles(src.paths.spec, req.Spec, m, files, src.oapi.scan); err != nil {
		return nil, err
	}
	if m.Tests && m.Idempotent {
		kit, err := renderKit(req, src.paths, m)
		if err != nil {
			return nil, err
		}
		files = append(files, kit)
	}
	return files, nil
}

// renderKit renders the conformance helpers, in a package of their own
// that imports the output's.
func renderKit(req *Request, paths outputPaths, m *model) (File, error) {
	m.KitPackage = paths.kitPackage
	if m.Import = req.OutputImport; m.Import == "" {
		return File{}, fmt.Errorf("%w: tests: true needs output.dir (%s) inside a Go module, to import it from the test helpers; none of its parents has a go.mod", ErrConfig, paths.dir)
	}
	kit, err := renderGo("kit.go.tmpl", m)
	if err != nil {
		return File{}, err
	}
	file := File{Path: paths.kit, Content: kit}
	pkgs, err := parseGoFiles([]File{file}, nil)
	if err != nil {
		return File{}, err
	}
	file.Content = usedImports(pkgs[0], pkgs[0].files[0])
	return file, nil
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
