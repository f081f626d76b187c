package annotation

import (
	"strconv"
	"strings"
	"time"

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
	key          Key
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
	status     string     // "" when absent or invalid
	statusNode *yaml.Node // the status value, even when invalid
	exclude    []Pointer
	include    []Pointer
	scope      *Scope
	key        *Key
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
		case "key":
			if k := r.key(field+".key", g.value); k != nil {
				d.key = *k
				d.key.Default = true
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
		case "status":
			s.statusNode = f.value
			s.status = r.statusPath(f.value)
		case "abandoned":
			s.abandonedNode = f.value
			s.abandoned = r.abandoned(f.value)
		case "complete-after":
			s.completeAfterNode = f.value
			s.completeAfter = r.completeAfter(f.value)
		case "fingerprint":
			s.exclude, s.include = r.fingerprint(f.value)
		case "key":
			s.key = r.key(field+".key", f.value)
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
