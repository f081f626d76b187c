package generator

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// codegenGate is the one way into oapi-codegen's package codegen.
// codegen.Generate keeps the options of its run in package variables,
// which the functions codegen exports read too (OperationDefinitions,
// GenerateTypesForSchemas and the rest, and the templates' helpers): two
// runs in one process must not overlap, and those functions must be
// called within the run whose options they need. Every use of codegen,
// from the first Generate to the last function that relies on its
// options, is one call of use.
type codegenGate struct{ mu sync.Mutex }

// oapiCodegen is package-level because the state it guards is.
var oapiCodegen codegenGate

// use runs f alone among the uses of codegen, and returns a panic in it,
// which some specs cause in oapi-codegen, as a *codegenPanic.
func (g *codegenGate) use(f func() error) (err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			err = &codegenPanic{value: p, stack: debug.Stack()}
		}
	}()
	return f()
}

// codegenPanic is a panic inside oapi-codegen.
type codegenPanic struct {
	value any
	stack []byte
}

func (p *codegenPanic) Error() string {
	return fmt.Sprintf("oapi-codegen failed (panic: %v)\n%s", p.value, p.stack)
}

// oapiOutput is what oapi-codegen makes of the spec.
type oapiOutput struct {
	src []byte // the Go code
	// scan is src parsed, with its names, by its path in the output (as
	// File.Path); nil when it does not parse.
	scan *nameScan
	// defs are oapi-codegen's definitions of the operations, whose Go
	// names the idempotency layer must match.
	defs []codegen.OperationDefinition
	// security is the document's security, which operations without
	// their own inherit.
	security openapi3.SecurityRequirements
	// version is the document's openapi version.
	version string
	// warnings say what was resolved in the spec, in memory, for
	// oapi-codegen's output to compile (see resolve.go), as
	// Result.Warnings; carry is what the augmented spec carries of it.
	warnings []string
	carry    carried
}

// runOapiCodegen generates models, the std-http server and the strict
// server for the spec. Once the spec is loaded, it waits for read, which
// says whether the spec's annotations are read without error, and
// returns that error before generating.
func runOapiCodegen(req *Request, paths outputPaths, read func() ([]annotation.Operation, error)) (out oapiOutput, err error) {
	specPath := paths.spec
	err = oapiCodegen.use(func() error {
		out, err = generateOapi(req, paths, read)
		return err
	})
	if p := (*codegenPanic)(nil); errors.As(err, &p) {
		return oapiOutput{}, fmt.Errorf("%s: oapi-codegen failed on this spec (panic: %v); simplify the construct it names or report it upstream\n%s", specPath, p.value, p.stack)
	}
	return out, err
}

// generateOapi is runOapiCodegen's run, within oapiCodegen.use.
func generateOapi(req *Request, paths outputPaths, read func() ([]annotation.Operation, error)) (oapiOutput, error) {
	cfg, specPath := req.Config, paths.spec
	// The status resources of async operations are the spec's too, once
	// the annotations are read.
	var annotated []annotation.Operation
	load := func() (*openapi3.T, error) {
		spec, err := loadSpec(req, specPath)
		if err == nil && annotated != nil {
			err = addStatusOperations(spec, annotated)
		}
		return spec, err
	}
	spec, err := load()
	annotated, rerr := read()
	if rerr != nil {
		return oapiOutput{}, rerr
	}
	if err == nil {
		err = addStatusOperations(spec, annotated)
		if err != nil {
			return oapiOutput{}, err
		}
	}
	if err != nil {
		if broken := brokenRefs(specPath, req.Spec, req.ref); broken != nil {
			// The loader's cause first: a broken reference may be what it
			// failed on, or may only stand beside it.
			return oapiOutput{}, errors.Join(fmt.Errorf("%s: load spec: %w", specPath, err), broken)
		}
		return oapiOutput{}, fmt.Errorf("%s: load spec: %w", specPath, err)
	}
	conf := codegen.Configuration{
		PackageName: cfg.Output.Package,
		Generate: codegen.GenerateOptions{
			StdHTTPServer: cfg.Server == "std-http",
			ChiServer:     cfg.Server == "chi",
			EchoServer:    cfg.Server == "echo",
			GinServer:     cfg.Server == "gin",
			Client:        cfg.Client,
			Strict:        true,
			Models:        true,
		},
		OutputOptions: cfg.OapiCodegen.OutputOptions,
	}
	if err := conf.Validate(); err != nil {
		return oapiOutput{}, fmt.Errorf("oapi-codegen options: %w", err)
	}
	mode := resolveMode{
		ahead:  true,
		tree:   sync.OnceValue(func() *yaml.Node { return specTree(specPath, req.Spec) }),
		finish: func(code string) string { return retitle(code, paths.specFromOutput, req.OapiCodegen) },
		file:   paths.oapi,
	}
	res, err := generateResolved(specPath, spec, load, conf, mode)
	if err != nil {
		return oapiOutput{}, err
	}
	defs, err := codegen.OperationDefinitions(res.spec)
	if err != nil {
		return oapiOutput{}, fmt.Errorf("%s: oapi-codegen operations: %w", specPath, err)
	}
	return oapiOutput{
		src:      []byte(res.code),
		scan:     res.scan,
		defs:     defs,
		security: res.spec.Security,
		version:  res.spec.OpenAPI,
		warnings: resolutionWarnings(specPath, res.found),
		carry:    res.carry,
	}, nil
}

// loadSpec loads the request's spec as oapi-codegen's own loader does
// (util.LoadSwaggerWithOverlay): external references followed, each
// element's origin recorded, which orders the routes as the spec does.
// The files come from the request, and remote references are refused.
func loadSpec(req *Request, specPath string) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	loader.IncludeOrigin = true
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, location *url.URL) ([]byte, error) {
		return req.readRef(location)
	}
	return loader.LoadFromDataWithPath(req.Spec, &url.URL{Path: filepath.ToSlash(specPath)})
}

// specTree is the spec's text as nodes, or nil when it cannot be parsed:
// where a resolution is, for a spec whose loaded document does not say.
func specTree(specPath string, src []byte) *yaml.Node {
	doc, err := annotation.Parse(specPath, src)
	if err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// oapiCodegenPath is the module whose version the header names.
const oapiCodegenPath = "github.com/oapi-codegen/oapi-codegen/v2"

var generatedBy = regexp.MustCompile(`(?m)^// Code generated by .* DO NOT EDIT\.$`)

// oapiCodegenVersion is the version of oapi-codegen built into the
// running binary, as Load puts it in a request; "" when the binary does
// not record it (a test binary).
func oapiCodegenVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == oapiCodegenPath {
				return d.Version
			}
		}
	}
	return ""
}

// retitle replaces oapi-codegen's header, which names the main module of
// whatever binary runs it (the user's module under go generate), with one
// that names idemgen and the oapi-codegen version, the same in every
// module, so that output does not change with who runs the generator.
func retitle(code, spec, version string) string {
	if version == "" {
		version = "v2"
	}
	header := fmt.Sprintf("// Code generated by idemgen with oapi-codegen %s from %s. DO NOT EDIT.", version, spec)
	// The header is at the top: matching the pattern over megabytes of
	// output is for another line like it, which is rare.
	at := generatedBy.FindStringIndex(code)
	if at == nil {
		return code
	}
	rest := code[at[1]:]
	if strings.Contains(rest, "// Code generated by ") {
		rest = generatedBy.ReplaceAllLiteralString(rest, header)
	}
	return code[:at[0]] + header + rest
}
