package generator

import (
	"cmp"
	"fmt"

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
		res, out, afresh := resolveAhead(specPath, spec, reload, conf, mode, hoists)
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
func resolveAhead(specPath string, spec *openapi3.T, reload func() (*openapi3.T, error), conf codegen.Configuration, mode resolveMode, hoists []hoist) (res *resolved, first *pass, afresh bool) {
	// The loop's first run of oapi-codegen sees the operationIds as
	// loaded, and the run after a resolution those the first run wrote
	// (ids).
	ids := operationIDsOf(spec)
	p, err := predict(spec, conf)
	if err != nil {
		return nil, nil, true
	}
	r := newResolver(specPath, mode, spec, hoists)
	kept := false
	if p != nil && len(p.pruned) > 0 {
		// The loop generates a fresh copy with skip-prune (keepPruned),
		// then resolves from that output.
		if spec, err = reload(); err != nil {
			return nil, nil, true
		}
		r.spec, ids, kept = spec, operationIDsOf(spec), true
		r.keptPruned(spec, p.pruned)
		conf.OutputOptions.SkipPrune = true
		if p, err = predict(spec, conf); err != nil {
			return nil, nil, true
		}
	}
	if p == nil || !p.scan.dirty() || r.clientNamed(p.scan, p.types.paths, conf) {
		if !kept {
			ids.restore()
			return nil, nil, false // nothing to resolve, or an option to set, which changes more names
		}
		p = nil // skip-prune alone
	}
	changed := false
	if p != nil {
		changed = r.enumConstants(p.scan, p.types.byName)
		changed = r.typeNames(p.scan, p.types.byName) || changed
		changed = r.typelessResponses(p.scan, p.types.paths) || changed
	}
	if !changed {
		ids.restore() // the run is the loop's first, or keepPruned's
	}
	changed = changed || kept
	code, err := mode.generate(spec, conf)
	if err != nil {
		return nil, nil, true
	}
	scan, scanErr := mode.scan(code)
	if !changed {
		return nil, &pass{code, scan, scanErr}, false
	}
	if scanErr != nil || scan.dirty() || len(scan.undeclaredNames()) > 0 || (p != nil && !p.confirmed(spec, conf, scan)) {
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
