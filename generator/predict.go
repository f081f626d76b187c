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
// compares every enum with every other. The names of the models need no
// rendering: they are the type definitions oapi-codegen collects before
// it renders, and the constants of their enums, which this file names as
// oapi-codegen does. With the rest of the output rendered alone, which is
// cheap, they predict what the output declares, and the resolutions can
// be made before oapi-codegen runs in full, once. The output is checked
// against the prediction; where they differ, resolving starts over from
// the output (resolveAhead), so the output is the same either way.

// predictFrom is the size of a spec, in operations and component
// schemas, from which resolving ahead pays. Predicting runs oapi-codegen
// once without output, which parses its templates as every run does,
// some 10 ms: for a smaller spec that is most of a full run, and running
// it twice when a resolution is needed costs less than predicting for
// every spec.
const predictFrom = 64

// restFirstBelow is the number of operations below which the prediction
// renders the output without models at once, rather than after a run
// that renders nothing and only if the models may need it: both runs
// set oapi-codegen's package variables, and for fewer operations the
// rendering (some 0.2 ms an operation) costs less than the other run.
const restFirstBelow = 64

// predictable is whether spec is large enough for resolving ahead.
func predictable(spec *openapi3.T) bool {
	size := operations(spec)
	if spec.Components != nil {
		size += len(spec.Components.Schemas)
	}
	return size >= predictFrom
}

// operations counts the operations of spec's paths.
func operations(spec *openapi3.T) int {
	n := 0
	if spec.Paths != nil {
		for _, item := range spec.Paths.Map() {
			n += len(item.Operations())
		}
	}
	return n
}

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
// told from its type definitions and from the output without models.
type prediction struct {
	types *typeSet
	scan  *nameScan
	// rest are the declarations of the output without models, whose
	// names the resolutions leave as they are.
	rest []nameDecl
}

// predict predicts the names oapi-codegen's output for spec declares
// when they may need a resolution; nil when no resolution looks needed,
// or when the names cannot be told without rendering the models. It
// runs oapi-codegen on spec, which prunes it as the full run does.
func predict(spec *openapi3.T, conf codegen.Configuration) (*prediction, error) {
	if conf.OutputOptions.ResolveTypeNameCollisions {
		// oapi-codegen then names types apart from the client's, which
		// it gathers only when it generates the client.
		return nil, nil
	}
	// oapi-codegen keeps what it makes of a spec in package variables,
	// which only Generate sets: generating nothing sets them, and so
	// does generating the output without models.
	rest := conf
	rest.Generate.Models = false
	rest.OutputOptions.SkipFmt = true
	first, restFirst := rest, operations(spec) < restFirstBelow
	if !restFirst {
		first.Generate = codegen.GenerateOptions{}
	}
	code, err := codegen.Generate(spec, first)
	if err != nil {
		return nil, err
	}
	ts, err := collectTypes(spec, conf)
	if err != nil {
		return nil, err
	}
	models, ok := ts.modelDecls(conf)
	if !ok || !ts.mayCollide(models, conf) {
		return nil, nil
	}
	if !restFirst {
		if code, err = codegen.Generate(spec, rest); err != nil {
			return nil, err
		}
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
	return &prediction{types: ts, scan: newNameScan(slices.Concat(models, scan.list), scan.methods), rest: scan.list}, nil
}

// confirmed is whether scan, of oapi-codegen's output for spec once
// resolved, declares what the prediction for spec says it does: the
// models of the resolved spec, named as modelDecls names them, then the
// rest as before. It must run right after codegen.Generate on spec.
func (p *prediction) confirmed(spec *openapi3.T, conf codegen.Configuration, scan *nameScan) bool {
	ts, err := collectTypes(spec, conf)
	if err != nil {
		return false
	}
	models, ok := ts.modelDecls(conf)
	if !ok || len(scan.list) != len(models)+len(p.rest) {
		return false
	}
	for i, d := range slices.Concat(models, p.rest) {
		s := scan.list[i]
		if s.name != d.name || s.kind != d.kind || s.constType != d.constType || s.constValue != d.constValue {
			return false
		}
	}
	return true
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

// enumConst is an enum of oapi-codegen's output, whose constants are
// named after its values, or after its type and values when prefixed.
type enumConst struct {
	td       codegen.TypeDefinition
	prefixed bool
}

// names returns the enum's constants' names, with their values.
func (e *enumConst) names() map[string]string {
	if !e.prefixed {
		return e.td.Schema.EnumValues
	}
	named := make(map[string]string, len(e.td.Schema.EnumValues))
	for k, v := range e.td.Schema.EnumValues {
		named[e.td.TypeName+codegen.UppercaseFirstCharacter(k)] = v
	}
	return named
}

// enumConstDecls returns the constants oapi-codegen declares for the
// enums among types, the types its models are made of, as its
// GenerateEnums names them: each enum once, by type name; prefixed with
// the type's name when an enum shares a value's name with another
// (always, with compatibility.always-prefix-enum-values), or with a type,
// or names one value like its own type. ok is false where oapi-codegen
// would refuse an enum.
func enumConstDecls(types []codegen.TypeDefinition, alwaysPrefix bool) (decls []nameDecl, ok bool) {
	var enums []*enumConst
	seen := map[string]bool{}
	others := map[string]bool{} // the types that are not enums
	for _, td := range types {
		if len(td.Schema.EnumValues) == 0 {
			others[td.TypeName] = true
		}
		if seen[td.TypeName] {
			continue
		}
		seen[td.TypeName] = true
		if len(td.Schema.EnumValues) > 0 {
			enums = append(enums, &enumConst{td: td, prefixed: alwaysPrefix || td.ForceEnumPrefix})
		}
	}
	prefixMeetingEnums(enums)
	for _, e := range enums {
		for k := range e.td.Schema.EnumValues {
			if others[k] || (!e.prefixed && k == e.td.TypeName) {
				e.prefixed = true
			}
		}
	}
	for _, e := range enums {
		str := e.td.Schema.GoType == "string"
		named := e.names()
		for _, name := range slices.Sorted(maps.Keys(named)) {
			lit, ok := enumLiteral(named[name], str)
			if !ok {
				return nil, false
			}
			decls = append(decls, nameDecl{name: name, kind: token.CONST, constType: e.td.TypeName, constValue: lit})
		}
	}
	return decls, true
}

// prefixMeetingEnums marks the enums oapi-codegen prefixes because they
// share a value's name with another enum, or their constants' names meet.
func prefixMeetingEnums(enums []*enumConst) {
	// oapi-codegen prefixes two enums that share a value's name, or whose
	// constants' names meet, until none meet; prefixing only adds
	// meetings, so the enums it prefixes are those found by meeting here,
	// in any order, without comparing every pair.
	byValue := map[string][]*enumConst{}
	for _, e := range enums {
		for k := range e.td.Schema.EnumValues {
			byValue[k] = append(byValue[k], e)
		}
	}
	for _, sharing := range byValue {
		if len(sharing) > 1 {
			for _, e := range sharing {
				e.prefixed = true
			}
		}
	}
	for changed := true; changed; {
		changed = false
		byName := map[string][]*enumConst{}
		for _, e := range enums {
			for name := range e.names() {
				byName[name] = append(byName[name], e)
			}
		}
		for _, meeting := range byName {
			if len(meeting) < 2 || !slices.ContainsFunc(meeting, func(e *enumConst) bool { return !e.prefixed }) {
				continue // both prefixed: oapi-codegen leaves them
			}
			for _, e := range meeting {
				changed = changed || !e.prefixed
				e.prefixed = true
			}
		}
	}
}

// enumLiteral is the literal of an enum constant's value, as oapi-codegen
// writes it for a string enum (str) or another; "" for a value that is
// not one literal. ok is false where oapi-codegen refuses the enum.
func enumLiteral(value string, str bool) (lit string, ok bool) {
	switch {
	case str:
		return codegen.StringToGoString(value), true
	case !numberOrBool(value):
		return "", false // oapi-codegen refuses the enum
	}
	// Written as it is, the value is one literal, or an identifier
	// (true) or expression (-1) that is none.
	x, err := parser.ParseExpr(value)
	if err != nil {
		return "", false
	}
	if b, ok := x.(*ast.BasicLit); ok {
		return b.Value, true
	}
	return "", true
}

// numberOrBool is whether oapi-codegen writes value as a non-string
// enum's constant, as its GenerateEnums checks.
func numberOrBool(value string) bool {
	if value == "true" || value == "false" {
		return true
	}
	_, err := strconv.ParseFloat(value, 64)
	return err == nil
}

// mayCollide is whether oapi-codegen's output may need a resolution
// that a prediction finds, judged from models, its models' declarations:
// two of them named alike, one named like a type the strict server or
// the client declares for an operation (<Op>RequestObject,
// <Op>ResponseObject, <Op><status>...Response, and the client's
// <Op>Response, New<Op>Request..., Parse<Op>Response), or a response
// without a schema type. It only spares the rendering without models
// where nothing needs it: what it misses, the loop finds in the output.
func (ts *typeSet) mayCollide(models []nameDecl, conf codegen.Configuration) bool {
	names := make([]string, 0, len(models))
	seen := make(map[string]bool, len(models))
	for _, d := range models {
		if seen[d.name] {
			return true
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
	var exact []string
	prefixes := map[string]string{} // a prefix, and what the rest must hold
	for _, op := range ts.ops {
		id := codegen.UppercaseFirstCharacter(op.OperationId)
		exact = append(exact, id+"RequestObject", id+"ResponseObject")
		if conf.Generate.Client {
			exact = append(exact, id+suffix, "Parse"+id+suffix)
			prefixes["New"+id+"Request"] = ""
		}
		for _, resp := range op.Responses {
			prefixes[op.OperationId+resp.StatusCode] = "Response"
			for _, c := range resp.Contents {
				if strings.HasPrefix(c.Schema.TypeDecl(), "interface") {
					return true
				}
			}
		}
	}
	for _, name := range exact {
		if seen[name] {
			return true
		}
	}
	slices.Sort(names)
	for prefix, holds := range prefixes {
		i, _ := slices.BinarySearch(names, prefix)
		for ; i < len(names) && strings.HasPrefix(names[i], prefix); i++ {
			if strings.Contains(names[i][len(prefix):], holds) {
				return true
			}
		}
	}
	return false
}
