package generator

import (
	"cmp"
	"errors"
	"fmt"
	"go/parser"
	"path/filepath"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/generator/annotation"
	"github.com/idemgen/idemgen/idem"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// clientCode is oapi-codegen's client and models for a spec: what a
// client team generates from the augmented spec.
func clientCode(spec []byte, pkg string) (code []byte, err error) {
	err = oapiCodegen.use(func() error {
		doc, err := openapi3.NewLoader().LoadFromData(spec)
		if err != nil {
			return fmt.Errorf("load spec: %w", err)
		}
		src, err := codegen.Generate(doc, clientConfig(pkg))
		if err != nil {
			return fmt.Errorf("oapi-codegen client: %w", err)
		}
		code = []byte(src)
		return nil
	})
	return code, err
}

// clientFile is the name of IdempotentClient's file in the output
// directory.
const clientFile = "idempotency_client.gen.go"

// finishGoFiles completes and checks the Go files of the output so far:
// it refuses a client that cannot make keys within the limits an
// operation declares for them (clientKeyErrors), gives idemgen's own files
// the imports they use (usedImports), and refuses Go code that would not
// compile for a reason parsing finds (checkCompile). It returns files with
// idemgen's files completed. spec is the text of the spec at specPath;
// oapi is oapi-codegen's file, parsed already.
func finishGoFiles(specPath string, spec []byte, m *model, files []File, oapi *nameScan) ([]File, error) {
	if m.Client && m.Idempotent {
		if err := clientKeyErrors(specPath, spec, m); err != nil {
			return nil, err
		}
	}
	pkgs, err := parseGoFiles(files, oapi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", specPath, err)
	}
	files = slices.Clone(files)
	for _, p := range pkgs {
		for i, f := range p.files {
			if name := filepath.Base(f.path); name != layerFile && name != clientFile {
				continue // oapi-codegen's, which imports what it uses
			}
			src := usedImports(p, f)
			parsed, err := parser.ParseFile(p.fset, f.path, src, 0)
			if err != nil {
				return nil, fmt.Errorf("%s: %s with its imports does not parse%s: %w", specPath, f.path, generatorBug, err)
			}
			p.files[i] = &goFile{path: f.path, src: src, ast: parsed}
			files[slices.IndexFunc(files, func(g File) bool { return g.Path == f.path })].Content = src
		}
	}
	if err := checkCompile(specPath, pkgs); err != nil {
		return nil, err
	}
	return files, nil
}

// clientKeyErrors reports the annotated operations whose declared
// Idempotency-Key parameter limits keys to ones IdempotentClient cannot
// make (see chooseClientKeys), each at the limit at fault in the spec.
func clientKeyErrors(specPath string, spec []byte, m *model) error {
	var errs []*annotation.Error
	var root *yaml.Node // the spec's tree, read at the first refusal
	for _, op := range m.Operations {
		if !op.Idempotent || !op.KeyDeclared {
			continue
		}
		_, refusal := chooseClientKeys(op.KeyMinLen, op.KeyMaxLen, op.KeyPattern)
		if refusal == nil {
			continue
		}
		if root == nil {
			if doc, err := annotation.Parse(specPath, spec); err == nil {
				root = doc
			} else {
				root = &yaml.Node{}
			}
		}
		errs = append(errs, &annotation.Error{
			Pos: keyLimitPos(specPath, root, op, refusal.field),
			Msg: fmt.Sprintf("client: true on %s %s: %s", op.Method, op.Path, refusal.msg),
		})
	}
	slices.SortStableFunc(errs, func(a, b *annotation.Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column))
	})
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

// keyLimitPos is where the spec writes field ("pattern", "maxLength") of
// the schema of op's Idempotency-Key header parameter: the value of the
// field, else the schema, else the parameter, else, when the parameter is
// in another file or the tree cannot be followed, op's x-idempotent.
func keyLimitPos(specPath string, root *yaml.Node, op operation, field string) annotation.Position {
	param, schema := keyParamNodes(root, op.Path, strings.ToLower(op.Method))
	n := param
	if schema != nil {
		n = schema
		if v := yamlField(schema, field); v != nil {
			n = v
		}
	}
	if n == nil {
		return op.pos
	}
	return annotation.Position{File: specPath, Line: max(n.Line, 1), Column: max(n.Column, 1)}
}

// keyParamNodes finds the Idempotency-Key header parameter of the
// operation at path and method (lower case) in the spec's tree, the
// operation's own before its path item's, and its schema, following
// local $refs; nil for what it cannot find.
func keyParamNodes(root *yaml.Node, path, method string) (param, schema *yaml.Node) {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	item := yamlRef(root, yamlField(yamlField(root, "paths"), path))
	for _, params := range []*yaml.Node{yamlField(yamlRef(root, yamlField(item, method)), "parameters"), yamlField(item, "parameters")} {
		if params == nil || params.Kind != yaml.SequenceNode {
			continue
		}
		for _, p := range params.Content {
			p = yamlRef(root, p)
			in, name := yamlField(p, "in"), yamlField(p, "name")
			if in != nil && name != nil && in.Value == "header" && strings.EqualFold(name.Value, idem.HeaderKey) {
				return p, yamlRef(root, yamlField(p, "schema"))
			}
		}
	}
	return nil, nil
}

// yamlField is the value of key in the mapping n; nil when n is no
// mapping or has no such key.
func yamlField(n *yaml.Node, key string) *yaml.Node {
	n = yamlAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return yamlAlias(n.Content[i+1])
		}
	}
	return nil
}

func yamlAlias(n *yaml.Node) *yaml.Node {
	for range 100 { // an alias may name an alias
		if n == nil || n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

// yamlRef follows n's local $ref ("#/components/..."), and that of what
// it names, to the node that is no reference; nil for a reference to
// another file or to nothing.
func yamlRef(root, n *yaml.Node) *yaml.Node {
	for range 100 { // a reference may name a reference
		ref := yamlField(n, "$ref")
		if ref == nil {
			return n
		}
		pointer, ok := strings.CutPrefix(ref.Value, "#")
		if !ok {
			return nil
		}
		n = root
		for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
			if pointer == "" {
				break
			}
			n = yamlField(n, strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
		}
	}
	return nil
}
