package generator

import (
	"cmp"
	"fmt"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"
)

// For some specs oapi-codegen writes code that does not compile, or
// none: it gives two declarations one name, declares the strict server's
// methods on interface{} for a response body without a type, prunes a
// schema only webhooks use while still naming it, or cannot map a
// discriminator over members written inline. Where the cause can be
// resolved without changing the API's wire format, generateResolved
// resolves it in the loaded document, in memory, with oapi-codegen's own
// extensions and options, and runs oapi-codegen again; each resolution is
// a warning, and what it changed in the document is carried by the
// augmented spec (carry.go). What it cannot resolve is left for
// checkNames to refuse.

// maxResolveRounds bounds how many times oapi-codegen runs again: a
// resolution can reveal another cause only when a new name meets an old
// one, which the names chosen avoid.
const maxResolveRounds = 3

// idemImport is the runtime's import path, for idem.JSONValue.
const idemImport = "github.com/idemgen/idemgen/idem"

// resolution is one cause resolved, for Result.Warnings.
type resolution struct {
	loc  *openapi3.Location // where the spec says what was resolved; nil when unknown
	text string
}

// enumRename is the renaming of an enum's constants that are named like
// other declarations: the enum's type and schema, and the values whose
// constants are renamed, with their old names.
type enumRename struct {
	typeName string
	td       typeDef
	// By the value, as the constant's literal: the old name and the new.
	old, chosen map[string]string
	names       []any // x-enum-varnames
}

// resolveMode says how generateResolved resolves.
type resolveMode struct {
	// inSpec resolves by changes to the document only, never with an
	// option of oapi-codegen: for the augmented spec, whose readers
	// generate their clients with options of their own.
	inSpec bool
	// tree returns the spec's text as nodes, where the place of a
	// resolution is found when the loaded document does not record it
	// (it records none for JSON); nil, or a nil tree, when it cannot be
	// had.
	tree func() *yaml.Node
	// ahead tries to resolve ahead of oapi-codegen's output
	// (resolveAhead) before resolving from it; not for the augmented
	// spec, whose client's names it does not predict.
	ahead bool
	// finish makes each output of oapi-codegen the file the caller
	// writes, at path file, before its names are scanned, so that the
	// scan of the last (resolved.scan) is the caller's parse of it. Nil
	// and "" leave the output as it is, parsed as oapi.gen.go.
	finish func(code string) string
	file   string
}

// generate runs oapi-codegen on spec and finishes its output.
func (m resolveMode) generate(spec *openapi3.T, conf codegen.Configuration) (string, error) {
	code, err := codegen.Generate(spec, conf)
	if err != nil || m.finish == nil {
		return code, err
	}
	return m.finish(code), nil
}

// scan finds the names of code, an output of generate.
func (m resolveMode) scan(code string) (*nameScan, error) {
	return scanNames(cmp.Or(m.file, "oapi.gen.go"), []byte(code))
}

// resolved is what generateResolved makes of a spec.
type resolved struct {
	code  string
	spec  *openapi3.T // the document code was generated from
	scan  *nameScan   // code's names; nil when it does not parse
	found []resolution
	carry carried
	// ahead is whether resolveAhead made it, running oapi-codegen in
	// full once.
	ahead bool
}

type resolver struct {
	specPath string
	mode     resolveMode
	spec     *openapi3.T // the document resolved, as it is now
	// taken holds the names chosen in earlier rounds, which the output
	// that made the choice did not declare yet.
	taken map[string]bool
	// done holds the duplicated names and interface types acted on: one
	// met again was not resolved, and is left to checkNames.
	done     map[string]bool
	found    []resolution
	enums    []*enumRename
	enumByTy map[string]*enumRename
	// clients are the operations whose client response types were named
	// like other declarations.
	clients []codegen.OperationDefinition
	// extended are the extensions set on the document, for the augmented
	// spec to carry; keep is the keeper added to it, if any.
	extended []extended
	keep     *keeper
	// pointers caches schemaPointers of pointersOf.
	pointers   map[*openapi3.Schema]string
	pointersOf *openapi3.T
}

// extended is an extension a resolution set: on a schema, whose pointer
// and final value are found at the end, or at pointer with value.
type extended struct {
	schema  *openapi3.Schema
	pointer string
	key     string
	value   any
}

// generateResolved runs oapi-codegen on spec and, while its output would
// not compile for a cause it can resolve, resolves it and runs it again.
// load loads the spec anew: pruning removes schemas from the document,
// so keeping them needs a fresh one. It returns the output, the document
// it was generated from, the resolutions as warnings and what the
// augmented spec carries of them.
//
// With mode.ahead, it first tries to resolve before running oapi-codegen
// in full (resolveAhead), which then runs once.
func generateResolved(specPath string, spec *openapi3.T, load func() (*openapi3.T, error), conf codegen.Configuration, mode resolveMode) (resolved, error) {
	hoists, problems := hoistDiscriminated(spec)
	// A fresh document needs the same hoists, which come out the same.
	reload := func() (*openapi3.T, error) {
		fresh, err := load()
		if err == nil {
			hoistDiscriminated(fresh)
		}
		return fresh, err
	}
	var first *pass
	if mode.ahead {
		res, out, afresh := resolveAhead(specPath, spec, conf, mode, hoists)
		switch {
		case res != nil:
			return *res, nil
		case afresh:
			var err error
			if spec, err = reload(); err != nil {
				return resolved{}, fmt.Errorf("%s: load spec: %w", specPath, err)
			}
		}
		first = out
	}
	return newResolver(specPath, mode, spec, hoists).loop(spec, reload, conf, problems, hoists, first)
}

// pass is one output of oapi-codegen and its names, or why they could
// not be had.
type pass struct {
	code    string
	scan    *nameScan
	scanErr error
}

func newResolver(specPath string, mode resolveMode, spec *openapi3.T, hoists []hoist) *resolver {
	r := &resolver{specPath: specPath, mode: mode, spec: spec, taken: map[string]bool{}, done: map[string]bool{}, enumByTy: map[string]*enumRename{}}
	for _, h := range hoists {
		r.found = append(r.found, resolution{r.position(h.pointer), h.describe()})
	}
	return r
}

// resolveAhead resolves from a prediction of the names oapi-codegen's
// output declares (predict.go), then runs oapi-codegen once. It returns
// the result when the output is the one the prediction was for; else
// nothing, with the output when nothing was resolved (the loop's first
// pass), or afresh when the loop must start over on a fresh document:
// the prediction or oapi-codegen failed, or the output declares what
// the prediction did not say. The loop makes the same resolutions from
// the output itself, so the result is the same either way; only the
// time differs, one full run of oapi-codegen instead of two.
func resolveAhead(specPath string, spec *openapi3.T, conf codegen.Configuration, mode resolveMode, hoists []hoist) (res *resolved, first *pass, afresh bool) {
	// The loop's first run of oapi-codegen sees the operationIds as
	// loaded, and the run after a resolution those the first run wrote
	// (ids).
	ids := operationIDsOf(spec)
	p, err := predict(spec, conf)
	if err != nil {
		return nil, nil, true
	}
	r := newResolver(specPath, mode, spec, hoists)
	if p == nil || !p.scan.dirty() || r.clientNamed(p.scan, p.types.paths, conf) {
		ids.restore()
		return nil, nil, false // nothing to resolve, or an option to set, which changes more names
	}
	changed := r.enumConstants(p.scan, p.types.byName)
	changed = r.typeNames(p.scan, p.types.byName) || changed
	changed = r.typelessResponses(p.scan, p.types.paths) || changed
	if !changed {
		ids.restore() // the run is the loop's first
	}
	code, err := mode.generate(spec, conf)
	if err != nil {
		return nil, nil, true
	}
	scan, scanErr := mode.scan(code)
	if !changed {
		return nil, &pass{code, scan, scanErr}, false
	}
	if scanErr != nil || scan.dirty() || len(scan.undeclaredNames()) > 0 || !p.confirmed(spec, conf, scan) {
		return nil, nil, true
	}
	r.reportEnums(scan)
	r.reportClientResponses(scan)
	return &resolved{code: code, spec: spec, scan: scan, found: r.found, carry: r.carried(hoists), ahead: true}, nil, false
}

// loop runs oapi-codegen on spec, or takes first, its output, and
// resolves what it can of what keeps the output from compiling, running
// oapi-codegen again after each round of resolutions.
func (r *resolver) loop(spec *openapi3.T, reload func() (*openapi3.T, error), conf codegen.Configuration, problems []unionProblem, hoists []hoist, first *pass) (resolved, error) {
	specPath, mode := r.specPath, r.mode
	if first == nil {
		code, err := mode.generate(spec, conf)
		if err != nil {
			if refusal := r.unionRefusal(err, problems); refusal != nil {
				return resolved{}, refusal
			}
			return resolved{}, fmt.Errorf("%s: oapi-codegen: %w", specPath, err)
		}
		scan, err := mode.scan(code)
		first = &pass{code, scan, err}
	}
	code, scan := first.code, first.scan
	if first.scanErr != nil {
		return resolved{code: code, spec: spec}, nil // checkNames reports it
	}
	if missing := scan.undeclaredNames(); len(missing) > 0 && !conf.OutputOptions.SkipPrune {
		keep := r.keepPruned
		if mode.inSpec {
			keep = r.keepReferred
		}
		var err error
		code, spec, scan, conf, err = keep(spec, reload, conf, code, scan, missing)
		if err != nil {
			return resolved{}, err
		}
		r.spec = spec
	}
	for round := 0; round < maxResolveRounds && scan.dirty(); round++ {
		ts, err := collectTypes(spec, conf)
		if err != nil {
			break // left to checkNames
		}
		tds, defs := ts.byName, ts.paths
		var changed bool
		if mode.inSpec {
			changed = r.clientResponseNames(scan, defs, spec, conf)
		} else {
			changed = r.clientResponses(scan, defs, &conf)
		}
		changed = r.enumConstants(scan, tds) || changed
		changed = r.typeNames(scan, tds) || changed
		if !mode.inSpec { // the strict server's alone
			changed = r.typelessResponses(scan, defs) || changed
		}
		if !changed {
			break
		}
		if code, err = mode.generate(spec, conf); err != nil {
			return resolved{}, fmt.Errorf("%s: oapi-codegen, once idemgen had resolved what kept its output from compiling: %w", specPath, err)
		}
		if scan, err = mode.scan(code); err != nil {
			break
		}
	}
	r.reportEnums(scan)
	r.reportClientResponses(scan)
	if mode.inSpec {
		for i := range r.found {
			r.found[i].text = "the augmented spec, for oapi-codegen's client of it: " + r.found[i].text
		}
	}
	return resolved{code: code, spec: spec, scan: scan, found: r.found, carry: r.carried(hoists)}, nil
}

// carried is what the augmented spec carries of the resolutions.
func (r *resolver) carried(hoists []hoist) carried {
	c := carried{hoists: hoists, keep: r.keep}
	seen := map[string]bool{}
	for _, e := range r.extended {
		if e.schema != nil {
			at, ok := r.pointerOf(e.schema)
			if !ok {
				continue // written in another file
			}
			e.pointer, e.value = at, e.schema.Extensions[e.key]
		}
		if seen[e.pointer+" "+e.key] {
			continue
		}
		seen[e.pointer+" "+e.key] = true
		c.extensions = append(c.extensions, extension{e.pointer, e.key, e.value})
	}
	return c
}

// extend records that a resolution set extension key on schema s.
func (r *resolver) extend(s *openapi3.Schema, key string) {
	r.extended = append(r.extended, extended{schema: s, key: key})
}

// pointerOf returns the pointer of the place where the document writes
// s.
func (r *resolver) pointerOf(s *openapi3.Schema) (string, bool) {
	if r.pointersOf != r.spec {
		r.pointers, r.pointersOf = schemaPointers(r.spec), r.spec
	}
	at, ok := r.pointers[s]
	return at, ok
}

// locate returns where the spec writes s, or nil when neither the loaded
// document nor the spec's text says.
func (r *resolver) locate(s *openapi3.Schema) *openapi3.Location {
	if loc := origin(s); loc != nil {
		return loc
	}
	if r.mode.tree == nil || s == nil {
		return nil
	}
	at, ok := r.pointerOf(s)
	if !ok {
		return nil
	}
	return r.position(at)
}

// locateIn is locate in another document than the one resolved: a fresh
// copy of it.
func (r *resolver) locateIn(doc *openapi3.T, s *openapi3.Schema) *openapi3.Location {
	spec := r.spec
	r.spec = doc
	defer func() { r.spec = spec }()
	return r.locate(s)
}

// position returns where the spec's text writes what pointer names (its
// key, for a member of a mapping), or nil.
func (r *resolver) position(pointer string) *openapi3.Location {
	if r.mode.tree == nil {
		return nil
	}
	root := r.mode.tree()
	if root == nil {
		return nil
	}
	key, n := nodeAt(root, pointer)
	if key != nil {
		n = key
	}
	if n == nil || n.Line == 0 {
		return nil // added by the augmented spec
	}
	return &openapi3.Location{Line: n.Line, Column: n.Column}
}

// keepPruned runs oapi-codegen again with output-options.skip-prune on a
// fresh copy of the document when its output names types it does not
// declare: oapi-codegen prunes the schemas no path uses, and keeps the
// webhooks' types that name them. If that does not declare them all, the
// first output stands.
func (r *resolver) keepPruned(spec *openapi3.T, load func() (*openapi3.T, error), conf codegen.Configuration, code string, scan *nameScan, missing []string) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	fresh, err := load()
	if err != nil {
		return code, spec, scan, conf, nil
	}
	kept := conf
	kept.OutputOptions.SkipPrune = true
	if all, err := r.mode.generate(fresh, kept); err == nil {
		if s, err := r.mode.scan(all); err == nil && len(s.undeclaredNames()) == 0 {
			schemas, loc := r.prunedSchemas(fresh, missing)
			r.found = append(r.found, resolution{loc, fmt.Sprintf("oapi-codegen prunes the schemas no path uses, yet the webhooks' types name %s; generated with oapi-codegen.output-options.skip-prune: true, which keeps every schema (set it in the config to say so)", prunedWhat(missing, schemas))})
			return all, fresh, s, kept, nil
		}
	}
	return r.regenerate(spec, conf, code, scan)
}

// keepReferred is keepPruned without the option, for the augmented spec:
// it adds a keeper (carry.go), a schema that refers to the schemas
// missing and to itself, which oapi-codegen does not prune.
func (r *resolver) keepReferred(spec *openapi3.T, load func() (*openapi3.T, error), conf codegen.Configuration, code string, scan *nameScan, missing []string) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	fresh, err := load()
	if err != nil {
		return code, spec, scan, conf, nil
	}
	schemas, loc := r.prunedSchemas(fresh, missing)
	if len(schemas) < len(missing) {
		return r.regenerate(spec, conf, code, scan) // types of no schema: a keeper cannot keep them
	}
	k := &keeper{name: freeName(componentNames(fresh), "IdemgenKeptSchemas"), schemas: schemas}
	k.add(fresh)
	if all, err := r.mode.generate(fresh, conf); err == nil {
		if s, err := r.mode.scan(all); err == nil && len(s.undeclaredNames()) == 0 {
			r.keep = k
			them := "them"
			if len(schemas) == 1 {
				them = "it"
			}
			r.found = append(r.found, resolution{loc, fmt.Sprintf("oapi-codegen leaves the schemas no path uses out of a client's models, yet the webhooks' types name %s; "+
				"kept %s with components.schemas.%s, which refers to %[2]s and to itself (a client generated with output-options.skip-prune: true does not need it)", prunedWhat(missing, schemas), them, k.name)})
			return all, fresh, s, conf, nil
		}
	}
	return r.regenerate(spec, conf, code, scan)
}

// prunedSchemas returns the schemas of fresh whose types are the missing
// ones, and where the first is written.
func (r *resolver) prunedSchemas(fresh *openapi3.T, missing []string) ([]string, *openapi3.Location) {
	var schemas []string
	var loc *openapi3.Location
	for _, name := range missing {
		if schema, ok := componentNamed(fresh, name); ok {
			schemas = append(schemas, schema)
			if loc == nil {
				loc = r.locateIn(fresh, fresh.Components.Schemas[schema].Value)
			}
		}
	}
	return schemas, loc
}

// prunedWhat names the schemas kept, or the types when they are not
// all schemas.
func prunedWhat(missing, schemas []string) string {
	switch {
	case len(schemas) == 1:
		return "schema " + schemas[0]
	case len(schemas) > 0:
		return "schemas " + strings.Join(schemas, ", ")
	case len(missing) == 1:
		return "type " + missing[0]
	}
	return "types " + strings.Join(missing, ", ")
}

// regenerate runs oapi-codegen on spec again, whose output (code, scan)
// stands, so that what follows sees spec's state: oapi-codegen keeps its
// state in package variables.
func (r *resolver) regenerate(spec *openapi3.T, conf codegen.Configuration, code string, scan *nameScan) (string, *openapi3.T, *nameScan, codegen.Configuration, error) {
	if _, err := codegen.Generate(spec, conf); err != nil {
		return "", nil, nil, conf, fmt.Errorf("%s: oapi-codegen: %w", r.specPath, err)
	}
	return code, spec, scan, conf, nil
}

// componentNamed returns the schema of components whose type has the Go
// name goName.
func componentNamed(spec *openapi3.T, goName string) (string, bool) {
	if spec.Components == nil {
		return "", false
	}
	for _, name := range codegen.SortedSchemaKeys(spec.Components.Schemas) {
		if codegen.SchemaNameToTypeName(name) == goName {
			return name, true
		}
		if s := spec.Components.Schemas[name].Value; s != nil {
			if n, ok := s.Extensions["x-go-name"].(string); ok && n == goName {
				return name, true
			}
		}
	}
	return "", false
}

// typeDef is a type oapi-codegen declares for a schema.
type typeDef struct {
	codegen.TypeDefinition
	// inline is whether the schema is one written inside another, whose
	// type oapi-codegen names from its place (x-go-type-name renames it),
	// rather than a component or an operation's body or parameters.
	inline bool
}

func (t typeDef) schema() *openapi3.Schema { return t.Schema.OAPISchema }

// typeSet is what oapi-codegen builds of a spec's schemas and operations
// before it renders them.
type typeSet struct {
	// components are the types of the components' schemas, parameters,
	// responses and request bodies, in oapi-codegen's order.
	components []codegen.TypeDefinition
	// paths are the operations of the paths; ops are those, the
	// webhooks' and the callbacks', and responseTypes the types of each
	// of ops' responses.
	paths, ops    []codegen.OperationDefinition
	responseTypes [][]codegen.TypeDefinition
	// byName are the types oapi-codegen declares for the spec's schemas,
	// by Go name, each inline type too.
	byName map[string][]typeDef
}

// collectTypes returns the types oapi-codegen declares for the spec, as
// it builds them. It must run right after codegen.Generate on spec, whose
// package state it reads.
func collectTypes(spec *openapi3.T, conf codegen.Configuration) (*typeSet, error) {
	ts := &typeSet{}
	components := map[*openapi3.Schema]bool{}
	if c := spec.Components; c != nil {
		for _, s := range c.Schemas {
			if s != nil && s.Value != nil {
				components[s.Value] = true
			}
		}
		schemas, err := codegen.GenerateTypesForSchemas(nil, c.Schemas, conf.OutputOptions.ExcludeSchemas)
		if err != nil {
			return nil, err
		}
		params, err := codegen.GenerateTypesForParameters(nil, c.Parameters)
		if err != nil {
			return nil, err
		}
		responses, err := codegen.GenerateTypesForResponses(nil, c.Responses)
		if err != nil {
			return nil, err
		}
		bodies, err := codegen.GenerateTypesForRequestBodies(nil, c.RequestBodies)
		if err != nil {
			return nil, err
		}
		ts.components = slices.Concat(schemas, params, responses, bodies)
	}
	var err error
	if ts.paths, err = codegen.OperationDefinitions(spec); err != nil {
		return nil, err
	}
	webhooks, err := codegen.WebhookOperationDefinitions(spec)
	if err != nil {
		return nil, err
	}
	callbacks, err := codegen.CallbackOperationDefinitions(spec)
	if err != nil {
		return nil, err
	}
	ts.ops = slices.Concat(ts.paths, webhooks, callbacks)
	top := slices.Clone(ts.components)
	for _, op := range ts.ops {
		top = append(top, op.TypeDefinitions...)
		top = append(top, codegen.GenerateTypeDefsForOperation(op)...)
		responses, err := op.GetResponseTypeDefinitions()
		if err != nil {
			return nil, err
		}
		var types []codegen.TypeDefinition
		for _, r := range responses {
			types = append(types, r.AdditionalTypeDefinitions...)
		}
		ts.responseTypes = append(ts.responseTypes, types)
		top = append(top, types...)
	}
	ts.byName = map[string][]typeDef{}
	type key struct {
		name   string
		schema *openapi3.Schema
	}
	seen := map[key]bool{}
	var add func(td codegen.TypeDefinition)
	add = func(td codegen.TypeDefinition) {
		k := key{td.TypeName, td.Schema.OAPISchema}
		if seen[k] {
			return
		}
		seen[k] = true
		inline := strings.Contains(td.JsonName, ".") && td.Schema.OAPISchema != nil && !components[td.Schema.OAPISchema]
		ts.byName[td.TypeName] = append(ts.byName[td.TypeName], typeDef{td, inline})
		for _, a := range td.Schema.AdditionalTypes {
			add(a)
		}
	}
	for _, td := range top {
		add(td)
	}
	return ts, nil
}

// free returns name, or name with the smallest number from 2 appended
// that makes it one that neither the output declares nor an earlier
// resolution chose, and takes it.
func (r *resolver) free(scan *nameScan, name string) string {
	try := name
	for i := 2; ; i++ {
		if _, declared := scan.declared[try]; !declared && !r.taken[try] {
			r.taken[try] = true
			return try
		}
		try = name + strconv.Itoa(i)
	}
}

// clientResponses turns on oapi-codegen's own
// output-options.resolve-type-name-collisions when the client's response
// type of an operation (<Operation>Response) is named like another
// declaration, a schema's type usually (OpenAI's DeleteAssistantResponse
// and the operation deleteAssistant): oapi-codegen then names the
// client's type apart, and only the client's Go API changes.
func (r *resolver) clientResponses(scan *nameScan, defs []codegen.OperationDefinition, conf *codegen.Configuration) bool {
	if !conf.Generate.Client || conf.OutputOptions.ResolveTypeNameCollisions {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	byWrapper := map[string]codegen.OperationDefinition{}
	for _, op := range defs {
		byWrapper[op.OperationId+suffix] = op
	}
	for _, name := range scan.dups {
		if op, ok := byWrapper[name]; ok && !r.done["client "+name] {
			r.done["client "+name] = true
			r.clients = append(r.clients, op)
		}
	}
	if len(r.clients) == 0 {
		return false
	}
	conf.OutputOptions.ResolveTypeNameCollisions = true
	return true
}

// clientNamed is whether a name declared twice is the client's response
// type of an operation, which clientResponses resolves with an option of
// oapi-codegen's.
func (r *resolver) clientNamed(scan *nameScan, defs []codegen.OperationDefinition, conf codegen.Configuration) bool {
	if !conf.Generate.Client || conf.OutputOptions.ResolveTypeNameCollisions {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	for _, op := range defs {
		if _, dup := scan.decls[op.OperationId+suffix]; dup {
			return true
		}
	}
	return false
}

// reportClientResponses adds the resolution of the client's response
// types, with the names they have in the final output.
func (r *resolver) reportClientResponses(scan *nameScan) {
	if len(r.clients) == 0 {
		return
	}
	var renames []string
	var loc *openapi3.Location
	for _, op := range r.clients {
		now := scan.resultOf("ClientWithResponses", op.OperationId+"WithResponse")
		renames = append(renames, fmt.Sprintf("%s %s's is %s", op.Method, op.Path, cmp.Or(now, "renamed")))
		if loc == nil && op.Spec != nil && op.Spec.Origin != nil {
			loc = op.Spec.Origin.Key
		}
	}
	text := fmt.Sprintf("oapi-codegen names the client's response types of %d operations like other declarations; generated with oapi-codegen.output-options.resolve-type-name-collisions: true, which names them apart: %s", len(renames), strings.Join(renames, ", "))
	if len(renames) == 1 {
		text = fmt.Sprintf("oapi-codegen names the client's response type of %s %s like another declaration; generated with oapi-codegen.output-options.resolve-type-name-collisions: true, which names it %s", r.clients[0].Method, r.clients[0].Path, cmp.Or(scan.resultOf("ClientWithResponses", r.clients[0].OperationId+"WithResponse"), "apart"))
	}
	r.found = append(r.found, resolution{loc, text})
}

// clientResponseNames is clientResponses without the option, for the
// augmented spec: where the client's response type of an operation
// (<Operation>Response) is named like a component's type (OpenAI's
// schema DeleteAssistantResponse, and the operation deleteAssistant),
// the component's type is named apart with x-go-name: its name with
// "Body" appended where it is the body of one of the operation's
// responses, "Type" otherwise. Its JSON is unchanged; types written
// inline are left to typeNames.
func (r *resolver) clientResponseNames(scan *nameScan, defs []codegen.OperationDefinition, spec *openapi3.T, conf codegen.Configuration) bool {
	if !conf.Generate.Client || spec.Components == nil {
		return false
	}
	suffix := cmp.Or(conf.OutputOptions.ResponseTypeSuffix, "Response")
	byWrapper := map[string]codegen.OperationDefinition{}
	for _, op := range defs {
		byWrapper[op.OperationId+suffix] = op
	}
	var renames []string
	var loc *openapi3.Location
	var single string
	for _, name := range scan.dups {
		op, ok := byWrapper[name]
		if !ok || r.done["client "+name] {
			continue
		}
		r.done["client "+name] = true
		c, ok := namedComponent(spec, name)
		if !ok {
			continue
		}
		chosen := r.free(scan, name+c.suffix(op))
		c.extensions()["x-go-name"] = chosen
		r.extended = append(r.extended, extended{pointer: c.pointer, key: "x-go-name", value: chosen})
		renames = append(renames, fmt.Sprintf("%s's type is %s", c.what(), chosen))
		if loc == nil {
			loc = r.position(c.pointer)
			single = fmt.Sprintf("oapi-codegen names the client's response type of %s %s like the type of %s; named the %s's type %s with x-go-name, which changes no JSON",
				op.Method, op.Path, c.what(), strings.TrimSuffix(c.section, "s"), chosen)
		}
	}
	if len(renames) == 0 {
		return false
	}
	const option = " (a client generated with output-options.resolve-type-name-collisions: true names the client's response types apart instead)"
	count := len(renames)
	const listed = 6
	if count > listed {
		renames = append(renames[:listed], fmt.Sprintf("and %d more", count-listed))
	}
	text := fmt.Sprintf("oapi-codegen names the client's response types of %d operations like the types of components; named those types apart with x-go-name, which changes no JSON: %s", count, strings.Join(renames, ", "))
	if count == 1 {
		text = single
	}
	r.found = append(r.found, resolution{loc, text + option})
	return true
}

// component is a schema, response, request body or parameter of
// components, which oapi-codegen gives a type named after it.
type component struct {
	section, name, pointer string
	schema                 *openapi3.Schema // for a schema
	ext                    *map[string]any
}

func (c component) extensions() map[string]any {
	if *c.ext == nil {
		*c.ext = map[string]any{}
	}
	return *c.ext
}

func (c component) what() string {
	return strings.TrimSuffix(c.section, "s") + " " + c.name
}

// suffix is what c's type name gets to be told from op's response type.
func (c component) suffix(op codegen.OperationDefinition) string {
	if c.schema == nil || op.Spec == nil || op.Spec.Responses == nil {
		return "Type"
	}
	for _, resp := range op.Spec.Responses.Map() {
		if resp == nil || resp.Value == nil {
			continue
		}
		for _, mt := range resp.Value.Content {
			if mt != nil && mt.Schema != nil && mt.Schema.Value == c.schema {
				return "Body"
			}
		}
	}
	return "Type"
}

// namedComponent returns the component whose type oapi-codegen names
// goName, unless the spec names it so itself (x-go-name).
func namedComponent(spec *openapi3.T, goName string) (component, bool) {
	c := spec.Components
	named := func(section, name string, ext *map[string]any) (component, bool) {
		if _, ok := (*ext)["x-go-name"]; ok {
			return component{}, false // the spec names it itself
		}
		if codegen.SchemaNameToTypeName(name) != goName {
			return component{}, false
		}
		return component{section: section, name: name, pointer: "/components/" + section + "/" + escapePointer(name), ext: ext}, true
	}
	for _, name := range codegen.SortedSchemaKeys(c.Schemas) {
		if s := c.Schemas[name]; s != nil && s.Ref == "" && s.Value != nil {
			if found, ok := named("schemas", name, &s.Value.Extensions); ok {
				found.schema = s.Value
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.Responses) {
		if v := c.Responses[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("responses", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.RequestBodies) {
		if v := c.RequestBodies[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("requestBodies", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	for _, name := range sortedKeys(c.Parameters) {
		if v := c.Parameters[name]; v != nil && v.Ref == "" && v.Value != nil {
			if found, ok := named("parameters", name, &v.Value.Extensions); ok {
				return found, true
			}
		}
	}
	return component{}, false
}

// enumConstants renames the constants of enum values that oapi-codegen
// names like another declaration, a type usually: it prefixes an enum's
// constants with the enum's type name when they collide with type names,
// and the prefixed names can collide again (Stripe's source.type value
// ach_credit_transfer makes SourceTypeAchCreditTransfer, the type of the
// schema source_type_ach_credit_transfer). Each such constant gets
// "Value" appended to its name through x-enum-varnames, which changes no
// value.
func (r *resolver) enumConstants(scan *nameScan, tds map[string][]typeDef) bool {
	changed := false
	for _, name := range scan.dups {
		decls := scan.decls[name]
		var consts []nameDecl
		for _, d := range decls {
			if d.kind == token.CONST && d.constType != "" && enumDef(tds, d.constType) != nil {
				consts = append(consts, d)
			}
		}
		if len(consts) == 0 || r.done["const "+name] {
			continue
		}
		r.done["const "+name] = true
		if len(consts) == len(decls) {
			consts = consts[1:] // enum constants only: the first keeps its name
		}
		for _, d := range consts {
			td := enumDef(tds, d.constType)
			s := td.schema()
			if _, set := s.Extensions["x-enum-varnames"]; set && r.enumByTy[d.constType] == nil {
				continue // the spec names them itself
			}
			if _, set := s.Extensions["x-enumNames"]; set {
				continue
			}
			e := r.enumByTy[d.constType]
			if e == nil {
				e = &enumRename{typeName: d.constType, td: *td, old: map[string]string{}, chosen: map[string]string{}}
				// x-enum-varnames names every value of the enum. The
				// constants keep the names they have: when oapi-codegen
				// prefixes them with the type's name, that is the whole
				// name, so that they keep it even when the renaming
				// removes the collisions that made oapi-codegen prefix
				// them (x-enum-varnames names are prefixed again only on
				// a collision).
				e.names = make([]any, len(s.Enum))
				prefixed := strings.HasPrefix(name, d.constType)
				for i, v := range s.Enum {
					value := fmt.Sprintf("%v", v)
					e.names[i] = value
					if now := scan.constNamed(d.constType, constLiteral(e.td, value)); prefixed && now != "" {
						e.names[i] = now
					}
				}
				r.enumByTy[d.constType] = e
				r.enums = append(r.enums, e)
			}
			if _, ok := e.chosen[d.constValue]; !ok {
				e.old[d.constValue] = name
				e.chosen[d.constValue] = r.free(scan, name+"Value")
				for i, v := range s.Enum {
					if constLiteral(e.td, fmt.Sprintf("%v", v)) == d.constValue {
						e.names[i] = e.chosen[d.constValue]
					}
				}
				if s.Extensions == nil {
					s.Extensions = map[string]any{}
				}
				s.Extensions["x-enum-varnames"] = slices.Clone(e.names)
				r.extend(s, "x-enum-varnames")
				changed = true
			}
		}
	}
	return changed
}

// enumDef returns the type definition of the enum type name.
func enumDef(tds map[string][]typeDef, name string) *typeDef {
	for i, td := range tds[name] {
		if len(td.Schema.EnumValues) > 0 && td.schema() != nil {
			return &tds[name][i]
		}
	}
	return nil
}

// constLiteral is how oapi-codegen writes value as the enum's constant.
func constLiteral(td typeDef, value string) string {
	if td.Schema.GoType == "string" {
		return `"` + value + `"`
	}
	return value
}

// reportEnums adds the resolution of each renamed enum, with the names its
// constants have in the final output.
func (r *resolver) reportEnums(scan *nameScan) {
	for _, e := range r.enums {
		var renames []string
		for _, lit := range slices.Sorted(maps.Keys(e.old)) {
			now := scan.constNamed(e.typeName, lit)
			if now == "" {
				now = e.chosen[lit]
			}
			renames = append(renames, e.old[lit]+" is "+now)
		}
		text := fmt.Sprintf("oapi-codegen names %d constants of enum %s (%s) like other declarations; renamed them with x-enum-varnames, their values unchanged: %s", len(renames), e.typeName, e.td.JsonName, strings.Join(renames, ", "))
		if len(renames) == 1 {
			text = fmt.Sprintf("oapi-codegen names a constant of enum %s (%s) like another declaration; renamed it with x-enum-varnames, its value unchanged: %s", e.typeName, e.td.JsonName, renames[0])
		}
		r.found = append(r.found, resolution{r.locate(e.td.schema()), text})
	}
}

// typeNames renames the types of inline schemas that oapi-codegen names
// like another declaration: the type of an enum property of a schema
// named like the strict server's response type of an operation (OpenAI's
// DeleteAssistantResponse.object and the operation deleteAssistant), or
// the items of an array in an anyOf named like the array itself (Stripe's
// form bodies). The inline schema gets x-go-type-name, its name with
// "Item", "Enum" or "Type" appended, which changes no JSON.
func (r *resolver) typeNames(scan *nameScan, tds map[string][]typeDef) bool {
	changed := false
	for _, name := range scan.dups {
		if r.done["type "+name] || r.done["const "+name] {
			continue
		}
		decls := scan.decls[name]
		var inline []typeDef
		seen := map[*openapi3.Schema]bool{}
		for _, td := range tds[name] {
			if td.inline && !seen[td.schema()] {
				seen[td.schema()] = true
				inline = append(inline, td)
			}
		}
		if len(inline) == 0 {
			continue
		}
		// Another declaration keeps the name: one that is not an inline
		// schema's type, else the outermost of them.
		var keeper *typeDef
		rename := inline
		if len(decls) <= len(inline) {
			slices.SortStableFunc(inline, func(a, b typeDef) int {
				return cmp.Compare(itemOf(inline, a), itemOf(inline, b))
			})
			keeper, rename = &inline[0], inline[1:]
		}
		for _, td := range rename {
			s := td.schema()
			if _, set := s.Extensions["x-go-type-name"]; set {
				continue // the spec names it itself
			}
			suffix, what := "Type", "schema"
			items := keeper != nil && keeper.schema().Items != nil && keeper.schema().Items.Value == s
			switch {
			case items:
				suffix = "Item"
			case len(td.Schema.EnumValues) > 0:
				suffix, what = "Enum", "enum"
			}
			chosen := r.free(scan, name+suffix)
			if s.Extensions == nil {
				s.Extensions = map[string]any{}
			}
			s.Extensions["x-go-type-name"] = chosen
			r.extend(s, "x-go-type-name")
			var text string
			if items {
				text = fmt.Sprintf("oapi-codegen gives the items of the array at %s the array's own type name, %s; named their type %s with x-go-type-name, which changes no JSON", keeper.JsonName, name, chosen)
			} else {
				other := "another declaration of its output"
				switch {
				case keeper != nil:
					other = "the type of " + keeper.JsonName
				case strings.HasSuffix(name, "ResponseObject") || strings.HasSuffix(name, "RequestObject"):
					other = "a type of the strict server"
				}
				text = fmt.Sprintf("oapi-codegen names the type of the %s at %s %s, like %s; named it %s with x-go-type-name, which changes no JSON", what, td.JsonName, name, other, chosen)
			}
			r.found = append(r.found, resolution{r.locate(s), text})
			changed = true
		}
		r.done["type "+name] = true
	}
	return changed
}

// itemOf is 1 when td's schema is the items of another's, so that sorting
// by it puts the arrays first.
func itemOf(tds []typeDef, td typeDef) int {
	for _, o := range tds {
		if o.schema().Items != nil && o.schema().Items.Value == td.schema() {
			return 1
		}
	}
	return 0
}

// typelessResponses gives the JSON response bodies whose schema says
// nothing of their shape the type idem.JSONValue. oapi-codegen makes them
// interface{} and declares the strict server's methods on that, which Go
// does not allow; idem.JSONValue holds any value and encodes as it, so
// the body sent is the same.
func (r *resolver) typelessResponses(scan *nameScan, defs []codegen.OperationDefinition) bool {
	visited := map[string]bool{}
	for _, m := range scan.interfaceMethods {
		if strings.HasPrefix(m.method, "Visit") && !r.done["interface "+m.recv] {
			visited[m.recv] = true
		}
	}
	if len(visited) == 0 {
		return false
	}
	changed := false
	for _, op := range defs {
		for _, resp := range op.Responses {
			for _, c := range resp.Contents {
				name := op.OperationId + resp.StatusCode + c.NameTagOrContentType() + "Response"
				if !visited[name] || op.Spec == nil || op.Spec.Responses == nil {
					continue
				}
				ref := op.Spec.Responses.Value(resp.StatusCode)
				if ref == nil || ref.Value == nil {
					continue
				}
				mt := ref.Value.Content[c.ContentType]
				if mt == nil {
					continue
				}
				if mt.Schema != nil && mt.Schema.Value != nil {
					if _, set := mt.Schema.Value.Extensions["x-go-type"]; set {
						continue
					}
				}
				s := &openapi3.Schema{Extensions: map[string]any{
					"x-go-type":        "idem.JSONValue",
					"x-go-type-import": map[string]any{"path": idemImport},
				}}
				if mt.Schema != nil && mt.Schema.Value != nil {
					s.Description = mt.Schema.Value.Description
				}
				mt.Schema = &openapi3.SchemaRef{Value: s}
				r.done["interface "+name] = true
				delete(visited, name)
				r.found = append(r.found, resolution{mediaOrigin(mt), fmt.Sprintf("the %s response of %s %s (%s) has no schema type, and oapi-codegen's interface{} for it cannot carry the strict server's methods; its body is an idem.JSONValue, which holds any JSON value: return %s(idem.JSONOf(v))", resp.StatusCode, op.Method, op.Path, c.ContentType, name)})
				changed = true
			}
		}
	}
	return changed
}

// mediaOrigin is where the spec writes mt, or nil when the loader did not
// say.
func mediaOrigin(mt *openapi3.MediaType) *openapi3.Location {
	if mt.Origin == nil {
		return nil
	}
	return mt.Origin.Key
}

// origin is where the spec writes s, or nil when the loader did not say.
func origin(s *openapi3.Schema) *openapi3.Location {
	if s == nil || s.Origin == nil {
		return nil
	}
	return s.Origin.Key
}

// resolutionWarnings renders the resolutions as Result.Warnings, in the
// order of the spec's text: "file:line:col: warning: ..." where the
// spec's place is known, "file: warning: ..." before them where it is not.
func resolutionWarnings(specPath string, found []resolution) []string {
	sorted := slices.Clone(found)
	slices.SortStableFunc(sorted, func(a, b resolution) int {
		return cmp.Compare(lineCol(a.loc), lineCol(b.loc))
	})
	out := make([]string, 0, len(sorted))
	for _, f := range sorted {
		if f.loc == nil || f.loc.Line == 0 {
			out = append(out, fmt.Sprintf("%s: warning: %s", specPath, f.text))
			continue
		}
		file := specPath
		if f.loc.File != "" && !sameFile(f.loc.File, specPath) {
			file = f.loc.File
		}
		out = append(out, fmt.Sprintf("%s:%d:%d: warning: %s", file, f.loc.Line, max(f.loc.Column, 1), f.text))
	}
	return out
}

func lineCol(loc *openapi3.Location) int64 {
	if loc == nil {
		return 0
	}
	return int64(loc.Line)<<32 | int64(loc.Column)
}

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// withResolutions merges the resolutions' warnings into the model's, which
// are in the order of the spec's text too, keeping that order.
func withResolutions(specPath string, resolved, warnings []string) []string {
	if len(resolved) == 0 {
		return warnings
	}
	pos := func(w string) int64 {
		rest, ok := strings.CutPrefix(w, specPath+":")
		if !ok {
			return 0
		}
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) < 3 {
			return 0
		}
		line, err1 := strconv.Atoi(parts[0])
		col, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			return 0
		}
		return int64(line)<<32 | int64(col)
	}
	out := make([]string, 0, len(resolved)+len(warnings))
	i, j := 0, 0
	for i < len(resolved) || j < len(warnings) {
		if j == len(warnings) || (i < len(resolved) && pos(resolved[i]) <= pos(warnings[j])) {
			out = append(out, resolved[i])
			i++
			continue
		}
		out = append(out, warnings[j])
		j++
	}
	return out
}
