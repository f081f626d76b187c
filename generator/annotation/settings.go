package annotation

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// level says how specific a setting is; when a ttl and a lease conflict,
// the more specific one is blamed, since it is the one written for this
// case.
type level int

const (
	levelBuiltin level = iota
	levelDocument
	levelOperation
)

// duration is a ttl or a lease together with where it came from.
type duration struct {
	value time.Duration
	text  string     // as written, e.g. "7d"
	field string     // e.g. "x-idempotent.ttl"; "" for a built-in default
	node  *yaml.Node // the value node; nil for a built-in default
	level level
}

// source names where d came from, for messages about another setting.
func (d duration) source() string {
	if d.field == "" {
		return "the default"
	}
	return d.field
}

// defaults are the x-idempotency settings, over the built-in ones.
type defaults struct {
	required     bool
	requiredNode *yaml.Node // nil unless written
	ttl, lease   duration
	maxBody      int64 // 0 unless written
	scope        Scope
	validate     bool // true unless written false
}

// settings are what an operation's x-idempotent mapping sets. Pointers
// are nil for keys that are absent or whose value is invalid; the nodes
// noted below are kept even for invalid values, for the checks that
// relate one key to another.
type settings struct {
	required   *bool
	requiredAt *yaml.Node // the required value, when valid
	ttlKey     *yaml.Node // the ttl key, even when its value is invalid
	ttl, lease *duration
	mode       string     // "" when absent or invalid
	modeNode   *yaml.Node // the mode value, even when invalid
	points     []string
	pointsNode *yaml.Node // the recovery-points value, even when invalid
	exclude    []Pointer
	scope      *Scope
	maxBody    int64 // 0 when absent or invalid
	validate   *bool // nil when absent or invalid

	abandoned         string     // "" when absent or invalid
	abandonedNode     *yaml.Node // the abandoned value, even when invalid
	completeAfter     *duration
	completeAfterNode *yaml.Node // the complete-after value, even when invalid
}

func (r *reader) defaults(f *entry) defaults {
	d := defaults{
		required: true,
		validate: true,
		ttl:      duration{value: DefaultTTL, text: "24h"},
		lease:    duration{value: DefaultLease, text: "1m"},
	}
	if f == nil {
		return d
	}
	const field = "x-idempotency"
	if f.value.Kind != yaml.MappingNode {
		r.errorf(f.value, "%s: %s; expected %s", field, describe(f.value), mappingOf(field))
		return d
	}
	for _, g := range r.unique(r.fields(f.value), field, all) {
		if !r.known(g.key, field) {
			continue
		}
		switch g.key.Value {
		case "ttl":
			if t := r.duration(field+".ttl", g.value, levelDocument); t != nil {
				d.ttl = *t
			}
		case "lease":
			if t := r.duration(field+".lease", g.value, levelDocument); t != nil {
				d.lease = *t
			}
		case "required":
			if b := r.boolean(field+".required", g.value); b != nil {
				d.required, d.requiredNode = *b, g.value
			}
		case "scope":
			if sc := r.scope(field+".scope", g.value); sc != nil {
				d.scope = *sc
				d.scope.Default = true
			}
		case "max-body":
			d.maxBody = r.size(field+".max-body", g.value)
		case "validate":
			if b := r.boolean(field+".validate", g.value); b != nil {
				d.validate = *b
			}
		}
	}
	r.checkLease(d.ttl, d.lease)
	return d
}

// annotation reads the x-idempotent value. A value of the wrong type still
// counts as annotated, so that it is not also reported as missing by the
// checks that need it.
func (r *reader) annotation(f *entry) (s settings, annotated bool) {
	if f == nil {
		return settings{}, false
	}
	if f.value.Kind == yaml.MappingNode {
		return r.settings(f.value), true
	}
	if b, ok := boolValue(f.value); ok {
		return settings{}, b
	}
	r.errorf(f.value, "x-idempotent: %s; expected true, false or %s", describe(f.value), mappingOf("x-idempotent"))
	return settings{}, true
}

func (r *reader) settings(m *yaml.Node) settings {
	const field = "x-idempotent"
	var s settings
	for _, f := range r.unique(r.fields(m), field, all) {
		if !r.known(f.key, field) {
			continue
		}
		switch f.key.Value {
		case "required":
			if s.required = r.boolean(field+".required", f.value); s.required != nil {
				s.requiredAt = f.value
			}
		case "ttl":
			s.ttlKey = f.key
			s.ttl = r.duration(field+".ttl", f.value, levelOperation)
		case "lease":
			s.lease = r.duration(field+".lease", f.value, levelOperation)
		case "mode":
			s.modeNode = f.value
			s.mode = r.mode(f.value)
		case "recovery-points":
			s.pointsNode = f.value
			s.points = r.recoveryPoints(f.value)
		case "abandoned":
			s.abandonedNode = f.value
			s.abandoned = r.abandoned(f.value)
		case "complete-after":
			s.completeAfterNode = f.value
			s.completeAfter = r.completeAfter(f.value)
		case "fingerprint":
			s.exclude = r.fingerprint(f.value)
		case "scope":
			s.scope = r.scope(field+".scope", f.value)
		case "max-body":
			s.maxBody = r.size(field+".max-body", f.value)
		case "validate":
			s.validate = r.boolean(field+".validate", f.value)
		}
	}
	return s
}

func (r *reader) boolean(field string, v *yaml.Node) *bool {
	b, ok := boolValue(v)
	if !ok {
		r.errorf(v, "%s: %s; expected true or false", field, describe(v))
		return nil
	}
	return &b
}

// boolValue accepts only YAML's true and false (in any case yaml.v3
// resolves as a bool), not strings such as "yes".
func boolValue(v *yaml.Node) (value, ok bool) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		return false, false
	}
	switch strings.ToLower(v.Value) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func isString(v *yaml.Node) bool {
	return v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str"
}

func (r *reader) duration(field string, v *yaml.Node, lvl level) *duration {
	const expected = "expected a Go duration such as 90s, 15m or 24h, or days such as 7d"
	if !isString(v) {
		r.errorf(v, "%s: %s; %s", field, describe(v), expected)
		return nil
	}
	d, problem := parseDuration(v.Value)
	switch {
	case problem == durationTooLong:
		r.errorf(v, "%s: %s is too long; expected at most %dd", field, quote(v.Value), maxDays)
	case problem != durationOK:
		r.errorf(v, "%s: %s is not a duration; %s", field, quote(v.Value), expected)
	case d <= 0:
		r.errorf(v, "%s: %s is not positive; expected a duration greater than zero, such as 90s", field, quote(v.Value))
	default:
		return &duration{value: d, text: v.Value, field: field, node: v, level: lvl}
	}
	return nil
}

// checkLease reports a lease longer than the ttl: the stored record would
// expire while the attempt holding it still runs, letting a retry execute
// the request a second time. The more specific setting is blamed.
func (r *reader) checkLease(ttl, lease duration) {
	if lease.value <= ttl.value {
		return
	}
	if lease.level >= ttl.level {
		r.errorf(lease.node, "%s: %s is longer than the ttl %s (%s); expected a lease no longer than the ttl", lease.field, lease.text, ttl.text, ttl.source())
		return
	}
	r.errorf(ttl.node, "%s: %s is shorter than the lease %s (%s); expected a ttl at least as long as the lease", ttl.field, ttl.text, lease.text, lease.source())
}

func (r *reader) mode(v *yaml.Node) string {
	const expected = "expected atomic or phased"
	if !isString(v) {
		r.errorf(v, "x-idempotent.mode: %s; %s", describe(v), expected)
		return ""
	}
	if v.Value != ModeAtomic && v.Value != ModePhased {
		r.errorf(v, "x-idempotent.mode: %s is not a mode; %s", quote(v.Value), expected)
		return ""
	}
	return v.Value
}

// checkRecoveryPoints enforces that recovery points come with the phased
// mode and only with it: an atomic handler has no phases to resume.
func (r *reader) checkRecoveryPoints(s settings) {
	const field = "x-idempotent.recovery-points"
	phased := s.mode == ModePhased
	switch {
	case s.modeNode != nil && s.mode == "":
		// an invalid mode, already reported: which rule applies is unknown
	case phased && s.pointsNode == nil:
		r.errorf(s.modeNode, "x-idempotent.mode: phased needs recovery-points; expected a recovery-points list naming the steps, such as [payment_created, charge_created]")
	case phased && s.pointsNode.Kind == yaml.SequenceNode && len(s.pointsNode.Content) == 0:
		r.errorf(s.pointsNode, "%s: the list is empty; expected at least one recovery point when mode is phased", field)
	case !phased && s.pointsNode != nil:
		r.errorf(s.pointsNode, "%s: only allowed when mode is phased; expected mode: phased beside it, or no recovery-points", field)
	}
}

func (r *reader) abandoned(v *yaml.Node) string {
	const expected = "expected complete or fail"
	if !isString(v) {
		r.errorf(v, "x-idempotent.abandoned: %s; %s", describe(v), expected)
		return ""
	}
	if v.Value != AbandonedComplete && v.Value != AbandonedFail {
		r.errorf(v, "x-idempotent.abandoned: %s is not an action; %s", quote(v.Value), expected)
		return ""
	}
	return v.Value
}

// completeAfter reads complete-after: a duration like a ttl's, of at
// least MinCompleteAfter. Like a ttl, it has no bound beyond what a
// duration holds.
func (r *reader) completeAfter(v *yaml.Node) *duration {
	const field = "x-idempotent.complete-after"
	d := r.duration(field, v, levelOperation)
	if d != nil && d.value < MinCompleteAfter {
		r.errorf(v, "%s: %s is shorter than 1s; expected at least 1s, such as 30m", field, quote(v.Value))
		return nil
	}
	return d
}

// checkAbandoned enforces that abandoned and complete-after come with the
// phased mode, since only a phased attempt has a recovery point to resume
// at, and that complete-after comes with abandoned, since without it no
// completer runs.
func (r *reader) checkAbandoned(s settings) {
	if s.abandonedNode == nil && s.completeAfterNode == nil {
		return
	}
	switch {
	case s.modeNode != nil && s.mode == "":
		// an invalid mode, already reported: whether these apply is unknown
	case s.mode != ModePhased:
		for _, k := range []struct {
			name string
			node *yaml.Node
		}{{"abandoned", s.abandonedNode}, {"complete-after", s.completeAfterNode}} {
			if k.node != nil {
				r.errorf(k.node, "x-idempotent.%s: only allowed when mode is phased; expected mode: phased beside it, or no %s", k.name, k.name)
			}
		}
		return
	}
	if s.abandonedNode == nil {
		r.errorf(s.completeAfterNode, "x-idempotent.complete-after: only allowed beside abandoned; expected abandoned: complete or fail beside it")
	}
}

func (r *reader) recoveryPoints(v *yaml.Node) []string {
	const field = "x-idempotent.recovery-points"
	if v.Kind != yaml.SequenceNode {
		r.errorf(v, "%s: %s; expected a list of names such as [payment_created, charge_created]", field, describe(v))
		return nil
	}
	byGoName := make(map[string]*yaml.Node, len(v.Content))
	var names []string
	for i, item := range v.Content {
		item = resolve(item)
		at := fmt.Sprintf("%s[%d]", field, i)
		if !isString(item) {
			r.errorf(item, "%s: %s; expected a name such as payment_created", at, describe(item))
			continue
		}
		name := item.Value
		if !validRecoveryPoint(name) {
			r.errorf(item, "%s: %s is not a valid recovery point; expected a name that starts with a letter and has only letters, digits, _ or -, such as payment_created", at, quote(name))
			continue
		}
		goName := GoName(name)
		if first, dup := byGoName[goName]; dup {
			r.duplicatePoint(at, item, first, goName)
			continue
		}
		byGoName[goName] = item
		names = append(names, name)
	}
	return names
}

// duplicatePoint reports a recovery point whose Go name is taken: two
// points with one name could not be told apart in the generated code.
func (r *reader) duplicatePoint(at string, item, first *yaml.Node, goName string) {
	if item.Value == first.Value {
		r.errorf(item, "%s: %s is listed twice (first at line %d); expected each recovery point once", at, quote(item.Value), first.Line)
		return
	}
	r.errorf(item, "%s: %s and %s (line %d) both become the Go name %s; expected names that differ in CamelCase", at, quote(item.Value), quote(first.Value), first.Line, goName)
}

func (r *reader) fingerprint(v *yaml.Node) []Pointer {
	const field = "x-idempotent.fingerprint"
	if v.Kind != yaml.MappingNode {
		r.errorf(v, "%s: %s; expected %s", field, describe(v), mappingOf(field))
		return nil
	}
	var exclude []Pointer
	for _, f := range r.unique(r.fields(v), field, all) {
		if !r.known(f.key, field) {
			continue
		}
		exclude = r.pointers(field+".exclude", f.value)
	}
	return exclude
}

func (r *reader) pointers(field string, v *yaml.Node) []Pointer {
	const example = "/metadata/trace_id"
	if v.Kind != yaml.SequenceNode {
		r.errorf(v, "%s: %s; expected a list of JSON pointers into the body, such as [%s], or parameter names", field, describe(v), example)
		return nil
	}
	var out []Pointer
	for i, item := range v.Content {
		item = resolve(item)
		at := fmt.Sprintf("%s[%d]", field, i)
		if !isString(item) {
			r.errorf(item, "%s: %s; expected a JSON pointer such as %s", at, describe(item), example)
			continue
		}
		if item.Value == "" {
			r.errorf(item, "%s: the value is empty; expected a JSON pointer such as %s, or a parameter's name such as X-Trace-Id", at, example)
			continue
		}
		if !strings.HasPrefix(item.Value, "/") { // a parameter's name, checked against the spec later
			out = append(out, Pointer{Value: item.Value, Pos: r.pos(item)})
			continue
		}
		if problem := pointerProblem(item.Value); problem != "" {
			r.errorf(item, "%s: %s is not a JSON pointer (%s); expected a pointer such as %s", at, quote(item.Value), problem, example)
			continue
		}
		out = append(out, Pointer{Value: item.Value, Pos: r.pos(item)})
	}
	return out
}

// scope reads a scope: none, or a mapping with header, function or both.
// field is x-idempotency.scope or x-idempotent.scope.
func (r *reader) scope(field string, v *yaml.Node) *Scope {
	if isString(v) && v.Value == "none" {
		return &Scope{Set: true, None: true}
	}
	if v.Kind != yaml.MappingNode {
		// A bare header name is the likeliest mistake: show it in the
		// mapping it belongs in.
		example := "X-Tenant-Id"
		if isString(v) && headerToken(v.Value) && !strings.EqualFold(v.Value, "none") {
			example = v.Value
		}
		r.errorf(v, "%s: %s; expected none, or a mapping such as {header: %s}, {function: true} or both", field, describe(v), example)
		return nil
	}
	sc := Scope{Set: true}
	valid := true
	for _, f := range r.unique(r.fields(v), field, all) {
		if !r.known(f.key, field) {
			valid = false
			continue
		}
		switch f.key.Value {
		case "header":
			name, ok := r.scopeHeader(field+".header", f.value)
			valid = valid && ok
			sc.Header, sc.HeaderPos = name, r.pos(f.value)
		case "function":
			b := r.boolean(field+".function", f.value)
			valid = valid && b != nil
			sc.Function = b != nil && *b
		}
	}
	if !valid {
		return nil
	}
	if sc.Header == "" && !sc.Function {
		r.errorf(v, "%s: the mapping names no scope; expected header: NAME, function: true or both, or scope: none for keys shared by all callers", field)
		return nil
	}
	return &sc
}

// scopeHeader reads the header of scope: {header: NAME}. Whether the
// operation declares that header is checked elsewhere, against the spec.
func (r *reader) scopeHeader(field string, v *yaml.Node) (string, bool) {
	const expected = "expected a header name such as X-Tenant-Id"
	switch {
	case !isString(v):
		r.errorf(v, "%s: %s; %s", field, describe(v), expected)
	case v.Value == "":
		r.errorf(v, "%s: the value is empty; %s", field, expected)
	case strings.EqualFold(v.Value, "Idempotency-Key"):
		r.errorf(v, "%s: %s is the key itself, not its scope; expected the header that identifies the caller, such as X-Tenant-Id", field, v.Value)
	case !headerToken(v.Value):
		r.errorf(v, "%s: %s is not a header name; %s", field, quote(v.Value), expected)
	default:
		return v.Value, true
	}
	return "", false
}

// headerToken reports whether s can be an HTTP header's name (RFC 9110's
// token).
func headerToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// describe says what a node of the wrong type is, for messages of the
// form "field: <describe>; expected ...".
func describe(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "the value is a mapping"
	case yaml.SequenceNode:
		return "the value is a list"
	case yaml.ScalarNode:
		return describeScalar(v)
	}
	return "the value is an unresolved alias"
}

func describeScalar(v *yaml.Node) string {
	switch tag := v.ShortTag(); tag {
	case "!!str":
		return quote(v.Value) + " is a string"
	case "!!int", "!!float":
		return truncate(v.Value) + " is a number"
	case "!!bool":
		return truncate(v.Value) + " is a bool"
	case "!!null":
		if v.Value == "" {
			return "the value is empty"
		}
		return "the value is null"
	default:
		return fmt.Sprintf("%s has tag %s", quote(v.Value), tag)
	}
}

// maxQuoted bounds how much of a value a message repeats, so that a stray
// multi-kilobyte string does not drown the message.
const maxQuoted = 64

func quote(s string) string {
	return fmt.Sprintf("%q", truncate(s))
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) > maxQuoted {
		return string([]rune(s)[:maxQuoted]) + "..."
	}
	return s
}

// MaxBodyLimit bounds max-body: the protocol buffers a body whole.
const MaxBodyLimit = 1 << 30

// sizeUnits are the units max-body takes, longest first.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// size reads max-body: bytes, as an integer, or a number of KiB, MiB or
// GiB. It returns 0 after reporting a bad value.
func (r *reader) size(field string, v *yaml.Node) int64 {
	const expected = "expected bytes such as 1048576, or a size such as 512KiB, 1MiB or 1GiB"
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!str") {
		r.errorf(v, "%s: %s; %s", field, describe(v), expected)
		return 0
	}
	text, unit := strings.TrimSpace(v.Value), int64(1)
	if v.ShortTag() == "!!str" {
		unit = 0
		for _, u := range sizeUnits {
			if n, ok := strings.CutSuffix(text, u.suffix); ok {
				text, unit = strings.TrimSpace(n), u.bytes
				break
			}
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case unit == 0 || err != nil:
		r.errorf(v, "%s: %s is not a size; %s", field, quote(v.Value), expected)
	case n <= 0:
		r.errorf(v, "%s: %s is not positive; %s", field, quote(v.Value), expected)
	case n > MaxBodyLimit/unit:
		r.errorf(v, "%s: %s is over 1GiB, which the protocol would buffer whole; expected at most 1GiB", field, quote(v.Value))
	default:
		return n * unit
	}
	return 0
}
