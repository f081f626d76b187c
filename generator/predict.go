package generator

import (
	"cmp"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// Resolving (resolve.go) needs the names oapi-codegen's output declares.
// Rendering the output to find them costs as much as generating it: on
// Stripe's spec, seconds for its models alone, where oapi-codegen
// compares every enum with every other, and on a small spec the parse
// of oapi-codegen's templates, which every run does. The names of the
// models need no rendering: they are the type definitions oapi-codegen
// collects before it renders, and the constants of their enums, which
// enumnames.go names as oapi-codegen does. So are the strict server's
// types that clash with them most often, and those it declares as
// interfaces; the rest of the output is rendered alone, which is cheap,
// only where a model may be named like a type of it. Together they
// predict what the output declares, and the resolutions can be made
// before oapi-codegen runs in full, once. The output is checked against
// the prediction; where they differ, resolving starts over from the
// output (resolveAhead), so the output is the same either way.

// prepare sets oapi-codegen's package state for spec and conf, and
// filters and prunes spec, as codegen.Generate does, without parsing
// oapi-codegen's templates, which is most of a small spec's run.
// oapi-codegen has no call for that alone; Generate does all of it before
// it compiles the patterns of streaming-content-types, and before it
// parses its templates, so a pattern that does not compile stops it right
// there. ok is false where it stopped on anything else, such as a spec it
// refuses: then its state is not known, and the caller's run of Generate
// reports the cause.
func prepare(spec *openapi3.T, conf codegen.Configuration) (ok bool) {
	conf.OutputOptions.StreamingContentTypes = append(slices.Clip(conf.OutputOptions.StreamingContentTypes), unmatchable)
	_, err := codegen.Generate(spec, conf)
	return err != nil && strings.Contains(err.Error(), "pattern "+strconv.Quote(unmatchable)+":")
}

// unmatchable is a pattern that does not compile, for prepare.
const unmatchable = "idemgen-prepare("

// operationIDs are the operationIds of a document's operations. When
// oapi-codegen runs, it writes their Go names over them in the document,
// and a later run sees those: echo's per-operation middleware keys, for
// one, are the ids a run sees.
type operationIDs map[*openapi3.Operation]string

// operationIDsOf records the operationIds of spec's operations: its
// paths', their callbacks' and its webhooks'.
func operationIDsOf(spec *openapi3.T) operationIDs {
	ids := operationIDs{}
	var item func(*openapi3.PathItem)
	item = func(p *openapi3.PathItem) {
		if p == nil {
			return
		}
		for _, op := range p.Operations() {
			if _, seen := ids[op]; op == nil || seen {
				continue
			}
			ids[op] = op.OperationID
			for _, cb := range op.Callbacks {
				if cb != nil && cb.Value != nil {
					for _, p := range cb.Value.Map() {
						item(p)
					}
				}
			}
		}
	}
	if spec.Paths != nil {
		for _, p := range spec.Paths.Map() {
			item(p)
		}
	}
	for _, p := range spec.Webhooks {
		item(p)
	}
	return ids
}

// restore writes the recorded operationIds back.
func (ids operationIDs) restore() {
	for op, id := range ids {
		op.OperationID = id
	}
}

// prediction is the names oapi-codegen's output for a spec declares,
// told from its type definitions and, where they may meet, from the
// output without models.
type prediction struct {
	types *typeSet
	scan  *nameScan
	// rest are the declarations of the output without models, whose
	// names the resolutions leave as they are; rendered is whether that
	// output was rendered. Where it was not, scan holds the models and
	// the strict server's response types that are interfaces.
	rest     []nameDecl
	rendered bool
	// pruned are the types the output names but does not declare: of
	// schemas only webhooks use, which oapi-codegen prunes. When set,
	// nothing else is predicted; the spec is generated with skip-prune.
	pruned []string
}

// predict predicts the names oapi-codegen's output for spec declares
// when they may need a resolution; nil when no resolution looks needed,
// or when the names cannot be told without rendering the models. It
// prunes spec as oapi-codegen's run does (prepare).
func predict(spec *openapi3.T, conf codegen.Configuration) (*prediction, error) {
	if conf.OutputOptions.ResolveTypeNameCollisions {
		// oapi-codegen then names types apart from the client's, which
		// it gathers only when it generates the client.
		return nil, nil
	}
	var schemas openapi3.Schemas // before pruning, where it may matter
	if spec.Components != nil && len(spec.Webhooks) > 0 && !conf.OutputOptions.SkipPrune {
		schemas = maps.Clone(spec.Components.Schemas)
	}
	if !prepare(spec, conf) {
		return nil, nil
	}
	ts, err := collectTypes(spec, conf)
	if err != nil {
		return nil, err
	}
	models, ok := ts.modelDecls(conf)
	if !ok {
		return nil, nil
	}
	if pruned := ts.prunedNamed(spec, schemas, models); len(pruned) > 0 {
		return &prediction{types: ts, pruned: pruned}, nil
	}
	if among, strict, withRest := ts.collisions(models, conf); !withRest {
		// The names the resolutions choose are checked in the output,
		// whose rest of them the prediction does not know: one of those
		// would make the output declare a name twice, and the loop
		// would resolve it from there.
		typeless, methods, ok := ts.typelessResponseTypes(conf)
		if !ok || (len(typeless) == 0 && !among && !strict) {
			return nil, nil
		}
		return &prediction{types: ts, scan: newNameScan(slices.Concat(models, ts.strictObjects(conf), typeless), methods)}, nil
	}
	// oapi-codegen keeps what it makes of a spec in package variables,
	// which prepare has set, and so does generating the output without
	// models.
	rest := conf
	rest.Generate.Models = false
	rest.OutputOptions.SkipFmt = true
	code, err := codegen.Generate(spec, rest)
	if err != nil {
		return nil, err
	}
	// Only its names are wanted, not the resolution of its identifiers.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "oapi.gen.go", code, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	scan := scanFile(fset, f)
	// The models come first in the output; oapi-codegen's output
	// without them is the rest of it.
	return &prediction{types: ts, scan: newNameScan(slices.Concat(models, scan.list), scan.methods), rest: scan.list, rendered: true}, nil
}

// confirmed is whether scan, of oapi-codegen's output for spec once
// resolved, declares what the prediction for spec says it does: the
// models of the resolved spec, named as modelDecls names them, then the
// rest as before, where it was rendered. It must run right after
// codegen.Generate on spec.
func (p *prediction) confirmed(spec *openapi3.T, conf codegen.Configuration, scan *nameScan) bool {
	ts, err := collectTypes(spec, conf)
	if err != nil {
		return false
	}
	models, ok := ts.modelDecls(conf)
	if !ok {
		return false
	}
	want := models
	if p.rendered {
		if len(scan.list) != len(models)+len(p.rest) {
			return false
		}
		want = slices.Concat(models, p.rest)
	}
	if len(scan.list) < len(want) {
		return false
	}
	for i, d := range want {
		s := scan.list[i]
		if s.name != d.name || s.kind != d.kind || s.constType != d.constType || s.constValue != d.constValue {
			return false
		}
	}
	return true
}

// typelessResponseTypes returns the strict server's response types that
// oapi-codegen declares as interfaces, each with the method it declares
// on it, as strict-interface.tmpl does: a response of a fixed status
// without headers, neither a reference nor multipart, whose schema's
// type is interface{}. ok is false for a server whose strict interface
// comes from another template.
func (ts *typeSet) typelessResponseTypes(conf codegen.Configuration) (decls []nameDecl, methods []interfaceMethod, ok bool) {
	g := conf.Generate
	switch {
	case !g.Strict:
		return nil, nil, true
	case g.FiberServer || g.FiberV3Server || g.IrisServer:
		return nil, nil, false
	}
	for _, op := range ts.paths {
		if op.IsAlias {
			continue
		}
		for _, resp := range op.Responses {
			if len(resp.Headers) > 0 || !resp.HasFixedStatusCode() || resp.IsRef() {
				continue
			}
			for _, c := range resp.Contents {
				if !c.IsSupported() || c.NameTag == "Multipart" || (c.Schema.IsRef() && !c.Schema.IsExternalRef()) {
					continue
				}
				if x, err := parser.ParseExpr(c.Schema.TypeDecl()); err != nil {
					return nil, nil, false
				} else if _, iface := x.(*ast.InterfaceType); !iface {
					continue
				}
				name := op.OperationId + resp.StatusCode + c.NameTagOrContentType() + "Response"
				decls = append(decls, nameDecl{name: name, kind: token.TYPE, iface: true})
				methods = append(methods, interfaceMethod{recv: name, method: "Visit" + op.OperationId + "Response"})
			}
		}
	}
	return decls, methods, true
}

// prunedNamed returns, sorted, the types of the schemas prepare pruned
// from spec (those of schemas it no longer has) that the types of its
// webhooks still name, and models do not declare: oapi-codegen prunes
// the schemas no path uses, yet renders the webhooks' types.
func (ts *typeSet) prunedNamed(spec *openapi3.T, schemas openapi3.Schemas, models []nameDecl) []string {
	pruned := map[string]bool{}
	for name, s := range schemas {
		if _, kept := spec.Components.Schemas[name]; kept {
			continue
		}
		goName := codegen.SchemaNameToTypeName(name)
		if s != nil && s.Value != nil {
			if n, ok := s.Value.Extensions["x-go-name"].(string); ok {
				goName = n
			}
		}
		pruned[goName] = true
	}
	if len(pruned) == 0 {
		return nil
	}
	for _, d := range models {
		delete(pruned, d.name)
	}
	named := map[string]bool{}
	var inType func(n ast.Node) bool
	inType = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // a type of another package
			return false
		case *ast.Field: // field names are not types
			ast.Inspect(n.Type, inType)
			return false
		case *ast.Ident:
			if pruned[n.Name] {
				named[n.Name] = true
			}
		}
		return true
	}
	var visit func(td codegen.TypeDefinition)
	visit = func(td codegen.TypeDefinition) {
		if x, err := parser.ParseExpr(td.Schema.TypeDecl()); err == nil {
			ast.Inspect(x, inType)
		}
		for _, a := range td.Schema.AdditionalTypes {
			visit(a)
		}
	}
	for i, op := range ts.ops[len(ts.paths):] {
		for _, td := range slices.Concat(op.TypeDefinitions, ts.responseTypes[len(ts.paths)+i]) {
			visit(td)
		}
		for _, body := range op.Bodies {
			if td := body.TypeDef(op.OperationId); body.IsSupported() && td != nil {
				visit(*td)
			}
		}
	}
	return slices.Sorted(maps.Keys(named))
}

// modelDecls returns the declarations of oapi-codegen's models (its
// output for generate.models) in their order: the constants of the
// enums, the components' types, the operations' types. ok is false
// where they cannot be told from the types: for options that declare
// more, or types that oapi-codegen refuses.
func (ts *typeSet) modelDecls(conf codegen.Configuration) (decls []nameDecl, ok bool) {
	compat := conf.Compatibility
	if compat.EnableAuthScopesOnContext || compat.DisableEnumValueConflictResolution {
		return nil, false
	}
	emitted := slices.Clone(ts.components)
	for i, op := range ts.ops {
		emitted = append(emitted, op.TypeDefinitions...)
		emitted = append(emitted, ts.responseTypes[i]...)
	}
	decls, ok = enumConstDecls(emitted, compat.AlwaysPrefixEnumValues)
	if !ok {
		return nil, false
	}
	// The components' types once each, as codegen.GenerateTypes
	// declares them.
	seen := map[string]codegen.TypeDefinition{}
	for _, td := range ts.components {
		if prev, dup := seen[td.TypeName]; dup {
			if codegen.TypeDefinitionsEquivalent(prev, td) {
				continue
			}
			return nil, false // oapi-codegen refuses two types named alike
		}
		seen[td.TypeName] = td
		decls = append(decls, typeDecl(td))
	}
	// The operations' parameters, then their bodies, as
	// param-types.tmpl and request-bodies.tmpl declare them.
	for _, op := range ts.ops {
		for _, td := range op.TypeDefinitions {
			decls = append(decls, typeDecl(td))
		}
	}
	for _, op := range ts.ops {
		for _, body := range op.Bodies {
			if !body.IsSupported() {
				continue
			}
			if td := body.TypeDef(op.OperationId); td != nil {
				decls = append(decls, typeDecl(*td))
			}
		}
	}
	return decls, true
}

// typeDecl is the declaration of td's type.
func typeDecl(td codegen.TypeDefinition) nameDecl {
	// A type whose declaration starts with the keyword interface is an
	// interface type.
	iface := !td.IsAlias() && strings.HasPrefix(strings.TrimSpace(td.Schema.TypeDecl()), "interface")
	return nameDecl{name: td.TypeName, kind: token.TYPE, iface: iface}
}

// collisions says whether oapi-codegen's output may need a resolution
// that a prediction finds, judged from models, its models'
// declarations: two of them named alike (among); one named like the
// strict server's <Op>RequestObject or <Op>ResponseObject (strict),
// whose names are known without rendering; or one named like another
// type the strict server or the client declares for an operation
// (<Op><status>...Response, and the client's <Op>Response,
// New<Op>Request..., Parse<Op>Response), which only the output without
// models tells (withRest). It only spares the rendering without models
// where nothing needs it: what it misses, the loop finds in the output.
func (ts *typeSet) collisions(models []nameDecl, conf codegen.Configuration) (among, strict, withRest bool) {
	names := make([]string, 0, len(models))
	seen := make(map[string]bool, len(models))
	for _, d := range models {
		if seen[d.name] {
			among = true
			continue
		}
		seen[d.name] = true
		names = append(names, d.name)
	}
	// The operations' own types are named after them too, apart from the
	// strict server's.
	for _, op := range ts.ops {
		for _, td := range op.TypeDefinitions {
			delete(seen, td.TypeName)
		}
	}
	names = slices.DeleteFunc(names, func(name string) bool { return !seen[name] })
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	var client []string
	prefixes := map[string]string{} // a prefix, and what the rest must hold
	for _, op := range ts.ops {
		id := codegen.UppercaseFirstCharacter(op.OperationId)
		strict = strict || (conf.Generate.Strict && (seen[id+"RequestObject"] || seen[id+"ResponseObject"]))
		if conf.Generate.Client {
			client = append(client, id+suffix, "Parse"+id+suffix)
			prefixes["New"+id+"Request"] = ""
		}
		for _, resp := range op.Responses {
			prefixes[op.OperationId+resp.StatusCode] = "Response"
		}
	}
	for _, name := range client {
		if seen[name] {
			return among, strict, true
		}
	}
	slices.Sort(names)
	for prefix, holds := range prefixes {
		i, _ := slices.BinarySearch(names, prefix)
		for ; i < len(names) && strings.HasPrefix(names[i], prefix); i++ {
			if strings.Contains(names[i][len(prefix):], holds) {
				return among, strict, true
			}
		}
	}
	return among, strict, false
}

// strictObjects returns the strict server's <Op>RequestObject and
// <Op>ResponseObject, as strict-interface.tmpl declares them for the
// operations of the paths.
func (ts *typeSet) strictObjects(conf codegen.Configuration) []nameDecl {
	if !conf.Generate.Strict {
		return nil
	}
	var decls []nameDecl
	for _, op := range ts.paths {
		if op.IsAlias {
			continue
		}
		id := codegen.UppercaseFirstCharacter(op.OperationId)
		decls = append(decls,
			nameDecl{name: id + "RequestObject", kind: token.TYPE},
			nameDecl{name: id + "ResponseObject", kind: token.TYPE, iface: true})
	}
	return decls
}
