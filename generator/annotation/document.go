package annotation

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// reader walks one document and collects every problem it finds, so that
// Read can report them all at once instead of stopping at the first.
type reader struct {
	file string
	errs []*Error
	// fieldsOf memoises the key/value pairs of each mapping, with merge
	// keys expanded: anchors shared by many operations are expanded once,
	// and a mapping that merges itself is cut short instead of looping.
	fieldsOf map[*yaml.Node][]entry
}

func newReader(file string) *reader {
	return &reader{file: file, fieldsOf: make(map[*yaml.Node][]entry)}
}

func (r *reader) pos(n *yaml.Node) Position {
	// yaml.v3 leaves positions at zero on nodes it did not read from the
	// text; clamping keeps every reported position a real place.
	return Position{File: r.file, Line: max(n.Line, 1), Column: max(n.Column, 1)}
}

func (r *reader) errorf(n *yaml.Node, format string, args ...any) {
	r.errs = append(r.errs, &Error{Pos: r.pos(n), Msg: fmt.Sprintf(format, args...)})
}

// err joins the problems found, sorted by position. A problem in an
// anchored value is met once per alias that uses it, so repeats are
// dropped.
func (r *reader) err() error {
	slices.SortFunc(r.errs, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
			strings.Compare(a.Msg, b.Msg),
		)
	})
	var errs []error
	for i, e := range r.errs {
		if i > 0 && *e == *r.errs[i-1] {
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// document reads the root mapping: the x-idempotency defaults first, since
// every operation depends on them, then the paths.
func (r *reader) document(doc *yaml.Node) []Operation {
	root := resolve(doc)
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		return nil // not an OpenAPI document; the spec loader says so
	}
	fields := r.unique(r.fields(root), "", func(key string) bool {
		return key == "paths" || key == "x-idempotency"
	})
	defs := r.defaults(find(fields, "x-idempotency"))
	var ops []Operation
	for _, f := range fields {
		switch f.key.Value {
		case "x-idempotency":
			// read above
		case "paths":
			ops = r.paths(f.value, defs)
		case "webhooks":
			for _, w := range r.fields(f.value) {
				r.outgoing(w.value, fmt.Sprintf("webhook %s", quote(w.key.Value)), "webhooks describe requests the API sends, not ones it serves")
			}
		default:
			r.stray(f.key, atRoot)
		}
	}
	return ops
}

func (r *reader) paths(n *yaml.Node, defs defaults) []Operation {
	if n.Kind != yaml.MappingNode {
		return nil // a malformed paths object is the spec loader's to report
	}
	var ops []Operation
	for _, f := range r.unique(r.fields(n), "", isPath) {
		if !isPath(f.key.Value) {
			r.stray(f.key, inPaths)
			continue
		}
		ops = append(ops, r.pathItem(f.key.Value, f.value, defs)...)
	}
	return ops
}

// isPath tells a path from a specification extension in the paths object.
func isPath(key string) bool { return !strings.HasPrefix(key, "x-") }

// pathItem reads the operations of one path item. A $ref path item is
// skipped: see the package documentation.
func (r *reader) pathItem(path string, n *yaml.Node, defs defaults) []Operation {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	fields := r.unique(r.fields(n), "", func(key string) bool {
		_, ok := operationMethod(key)
		return ok
	})
	if find(fields, "$ref") != nil {
		return nil
	}
	var ops []Operation
	for _, f := range fields {
		method, ok := operationMethod(f.key.Value)
		if !ok {
			r.stray(f.key, onPathItem)
			continue
		}
		if op, ok := r.operation(path, method, f.value, defs); ok {
			ops = append(ops, op)
		}
	}
	return ops
}

// operationMethod maps a path item key to its HTTP method; other keys
// (parameters, summary, servers, ...) are not operations.
func operationMethod(key string) (string, bool) {
	switch key {
	case "get", "put", "post", "delete", "options", "head", "patch", "trace":
		return strings.ToUpper(key), true
	}
	return "", false
}

// safeMethod reports the methods that HTTP already defines as idempotent
// and that carry no body to replay, so an annotation on them is a mistake.
func safeMethod(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// operation reads one operation; ok is false when it is not annotated.
func (r *reader) operation(path, method string, n *yaml.Node, defs defaults) (op Operation, ok bool) {
	if n.Kind != yaml.MappingNode {
		return Operation{}, false
	}
	fields := r.unique(r.fields(n), "", func(key string) bool {
		return key == "x-idempotent" || key == "x-idempotency-ttl" || key == "operationId"
	})
	var annotation, shorthand *entry
	var id string
	for i, f := range fields {
		switch f.key.Value {
		case "x-idempotent":
			annotation = &fields[i]
		case "x-idempotency-ttl":
			shorthand = &fields[i]
		case "operationId":
			if f.value.Kind == yaml.ScalarNode {
				id = f.value.Value
			}
		case "callbacks":
			r.callbacks(f.value)
		default:
			r.stray(f.key, inOperation)
		}
	}
	s, annotated := r.annotation(annotation)
	if !annotated {
		if shorthand != nil {
			r.errorf(shorthand.key, "x-idempotency-ttl has no effect without x-idempotent; expected x-idempotent: true or an x-idempotent mapping beside it")
		}
		return Operation{}, false
	}
	if safeMethod(method) {
		r.errorf(annotation.key, "x-idempotent on %s: %s is idempotent already; expected x-idempotent on POST, PUT, PATCH or DELETE", method, method)
	}
	if shorthand != nil {
		r.shorthandTTL(&s, shorthand)
	}
	return r.build(path, method, id, annotation.key, s, defs), true
}

// shorthandTTL applies x-idempotency-ttl, which must not compete with a
// ttl in the x-idempotent mapping: neither could be said to win.
func (r *reader) shorthandTTL(s *settings, shorthand *entry) {
	if s.ttlKey != nil {
		r.errorf(shorthand.key, "x-idempotency-ttl repeats the ttl set in x-idempotent at line %d; expected the ttl in only one of them", s.ttlKey.Line)
		return
	}
	s.ttl = r.duration("x-idempotency-ttl", shorthand.value, levelOperation)
}

// build merges an operation's settings over the document defaults and
// checks the settings that depend on each other.
func (r *reader) build(path, method, id string, key *yaml.Node, s settings, defs defaults) Operation {
	op := Operation{
		Path:               path,
		Method:             method,
		OperationID:        id,
		Required:           defs.required,
		Mode:               ModeAtomic,
		RecoveryPoints:     s.points,
		FingerprintExclude: s.exclude,
		FingerprintInclude: s.include,
		Scope:              defs.scope,
		Key:                defs.key,
		Pos:                r.pos(key),
	}
	if s.key != nil {
		op.Key = *s.key
	}
	if s.scope != nil {
		op.Scope = *s.scope // replaces the default whole, so that none or a header alone can override it
	}
	if defs.requiredNode != nil {
		pos := r.pos(defs.requiredNode)
		op.RequiredAt = &pos
	}
	if s.required != nil {
		op.Required = *s.required
		pos := r.pos(s.requiredAt)
		op.RequiredAt = &pos
	}
	ttl, lease := defs.ttl, defs.lease
	if s.ttl != nil {
		ttl = *s.ttl
	}
	if s.lease != nil {
		lease = *s.lease
	}
	if s.ttl != nil || s.lease != nil { // otherwise checked once, with the defaults
		r.checkLease(ttl, lease)
	}
	op.TTL, op.Lease = ttl.value, lease.value
	op.MaxBody = defs.maxBody
	if s.maxBody != 0 {
		op.MaxBody = s.maxBody
	}
	op.Validate = defs.validate
	if s.validate != nil {
		op.Validate = *s.validate
	}
	if s.mode != "" {
		op.Mode = s.mode
		op.ModePos = r.pos(s.modeNode)
	}
	r.checkRecoveryPoints(s)
	r.checkAsync(s, op.Required, op.RequiredAt)
	if s.status != "" {
		op.Status, op.StatusPos = s.status, r.pos(s.statusNode)
	}
	r.checkAbandoned(s)
	if s.abandoned != "" {
		op.Abandoned = s.abandoned
		pos := r.pos(s.abandonedNode)
		op.AbandonedAt = &pos
		op.CompleteAfter = DefaultCompleteAfter
		if s.completeAfter != nil {
			op.CompleteAfter = s.completeAfter.value
		}
	}
	return op
}

// place is where in the document an extension key was found.
type place int

const (
	atRoot place = iota
	inPaths
	onPathItem
	inOperation
)

func (p place) String() string {
	switch p {
	case atRoot:
		return "at the document root"
	case inPaths:
		return "in the paths object"
	case onPathItem:
		return "on a path item"
	}
	return "in an operation"
}

// stray reports idemgen extensions written where idemgen does not read
// them. Without it a misplaced or misspelt annotation (x-idempotant,
// X-Idempotent, x-idempotent on a path item) would be ignored silently and
// the operation left unguarded. Other keys are none of this package's
// business.
func (r *reader) stray(key *yaml.Node, at place) {
	name := key.Value
	switch {
	case !strings.HasPrefix(strings.ToLower(name), "x-idemp"):
		return
	case !slices.Contains(extensions, name):
		r.errorf(key, "unknown extension %s; expected x-idempotent or x-idempotency-ttl in an operation, or x-idempotency at the document root", quote(name))
	case name == "x-idempotency":
		r.errorf(key, "x-idempotency has no effect %s; expected it at the document root", at)
	default: // x-idempotent, x-idempotency-ttl
		r.errorf(key, "%s has no effect %s; expected it inside an operation (post, put, patch or delete)", name, at)
	}
}

// entry is one key/value pair of a mapping, aliases resolved.
type entry struct{ key, value *yaml.Node }

func find(fields []entry, key string) *entry {
	for i := range fields {
		if fields[i].key.Value == key {
			return &fields[i]
		}
	}
	return nil
}

// fields lists the key/value pairs of mapping m with aliases resolved and
// merge keys (<<) expanded. As YAML's merge rule says, keys written in m
// win over merged ones, and earlier merged mappings win over later ones.
// Keys written twice in m are all kept, for unique to report.
func (r *reader) fields(m *yaml.Node) []entry {
	if fields, ok := r.fieldsOf[m]; ok {
		return fields
	}
	r.fieldsOf[m] = nil // a merge that comes back to m while m is being read adds nothing
	var own, merged []entry
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := resolve(m.Content[i]), resolve(m.Content[i+1])
		if isMerge(key) {
			merged = append(merged, r.mergeSources(value)...)
			continue
		}
		own = append(own, entry{key, value})
	}
	fields := own
	seen := make(map[string]bool, len(own))
	for _, f := range own {
		seen[f.key.Value] = true
	}
	for _, f := range merged {
		if !seen[f.key.Value] {
			seen[f.key.Value] = true
			fields = append(fields, f)
		}
	}
	r.fieldsOf[m] = fields
	return fields
}

func isMerge(key *yaml.Node) bool {
	return key.Kind == yaml.ScalarNode && key.Value == "<<" && key.ShortTag() == "!!merge"
}

// mergeSources returns the fields a merge key brings in: one mapping or a
// list of mappings. Anything else is not a valid merge and adds nothing.
func (r *reader) mergeSources(v *yaml.Node) []entry {
	switch v.Kind {
	case yaml.MappingNode:
		return r.fields(v)
	case yaml.SequenceNode:
		var fields []entry
		for _, item := range v.Content {
			if item = resolve(item); item.Kind == yaml.MappingNode {
				fields = append(fields, r.fields(item)...)
			}
		}
		return fields
	}
	return nil
}

// unique drops repeated keys, keeping the first, and reports each repeat
// the caller reads (checked): yaml.v3's node tree keeps duplicates that its
// map decoding would reject, and a second x-idempotent must not be lost
// silently.
func (r *reader) unique(fields []entry, field string, checked func(key string) bool) []entry {
	prefix := ""
	if field != "" {
		prefix = field + ": "
	}
	first := make(map[string]*yaml.Node, len(fields))
	out := make([]entry, 0, len(fields))
	for _, f := range fields {
		key := f.key.Value
		if prev, dup := first[key]; dup {
			if checked(key) {
				r.errorf(f.key, "%sduplicate key %s (first at line %d); expected each key once", prefix, quote(key), prev.Line)
			}
			continue
		}
		first[key] = f.key
		out = append(out, f)
	}
	return out
}

func all(string) bool { return true }

// maxAliasChain bounds alias resolution; yaml.v3 never chains aliases, so
// the bound only matters for hand-built trees.
const maxAliasChain = 64

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliasChain; i++ {
		n = n.Alias
	}
	return n
}

// callbacks reports annotations in an operation's callbacks: each is a
// request the API sends to its client, which no Idempotency-Key protects.
func (r *reader) callbacks(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for _, cb := range r.fields(n) {
		if cb.value.Kind != yaml.MappingNode {
			continue
		}
		for _, expr := range r.fields(cb.value) {
			r.outgoing(expr.value, fmt.Sprintf("callback %s", quote(cb.key.Value)), "a callback is a request the API sends, not one it serves")
		}
	}
}

// outgoing reports x-idempotent and x-idempotency-ttl on a path item, or
// its operations, that describes requests the API sends (a webhook or a
// callback): there the annotations would have no effect, and silently
// ignoring them would leave the author believing the requests protected.
func (r *reader) outgoing(item *yaml.Node, what, why string) {
	if item.Kind != yaml.MappingNode {
		return
	}
	report := func(f entry) {
		if b, ok := boolValue(f.value); ok && !b {
			return // x-idempotent: false asks for nothing
		}
		if f.key.Value == "x-idempotent" || f.key.Value == "x-idempotency-ttl" {
			r.errorf(f.key, "%s has no effect on %s: %s; expected it on an operation under paths", f.key.Value, what, why)
		}
	}
	for _, f := range r.fields(item) {
		report(f)
		if _, ok := operationMethod(f.key.Value); !ok || f.value.Kind != yaml.MappingNode {
			continue
		}
		for _, g := range r.fields(f.value) {
			report(g)
			if g.key.Value == "callbacks" {
				r.callbacks(g.value)
			}
		}
	}
}
