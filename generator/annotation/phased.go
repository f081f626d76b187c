package annotation

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

func (r *reader) mode(v *yaml.Node) string {
	const expected = "expected atomic, phased or async"
	if !isString(v) {
		r.errorf(v, "x-idempotent.mode: %s; %s", describe(v), expected)
		return ""
	}
	if v.Value != ModeAtomic && v.Value != ModePhased && v.Value != ModeAsync {
		r.errorf(v, "x-idempotent.mode: %s is not a mode; %s", quote(v.Value), expected)
		return ""
	}
	return v.Value
}

// checkRecoveryPoints enforces that recovery points come with the phased
// mode, and may come with the async one, whose handler may run in
// phases: an atomic handler has no phases to resume.
func (r *reader) checkRecoveryPoints(s settings) {
	const field = "x-idempotent.recovery-points"
	phased := s.mode == ModePhased
	switch {
	case s.modeNode != nil && s.mode == "":
		// an invalid mode, already reported: which rule applies is unknown
	case phased && s.pointsNode == nil:
		r.errorf(s.modeNode, "x-idempotent.mode: phased needs recovery-points; expected a recovery-points list naming the steps, such as [payment_created, charge_created]")
	case (phased || s.mode == ModeAsync) && s.pointsNode != nil && s.pointsNode.Kind == yaml.SequenceNode && len(s.pointsNode.Content) == 0:
		r.errorf(s.pointsNode, "%s: the list is empty; expected at least one recovery point when mode is %s", field, s.mode)
	case !phased && s.mode != ModeAsync && s.pointsNode != nil:
		r.errorf(s.pointsNode, "%s: only allowed when mode is phased or async; expected mode: phased beside it, or no recovery-points", field)
	}
}

// checkAsync enforces that an async operation has a status resource and
// a required key, and that status comes with the async mode only.
func (r *reader) checkAsync(s settings, required bool, requiredAt *Position) {
	switch {
	case s.modeNode != nil && s.mode == "":
		// an invalid mode, already reported
	case s.mode == ModeAsync && s.statusNode == nil:
		r.errorf(s.modeNode, "x-idempotent.mode: async needs status, the path of the resource a client polls for the request's result; expected status beside it, such as /exports/requests/{key}")
	case s.mode != ModeAsync && s.statusNode != nil:
		r.errorf(s.statusNode, "x-idempotent.status: only allowed when mode is async; expected mode: async beside it, or no status")
	case s.mode == ModeAsync && !required:
		at := s.modeNode
		if s.requiredAt != nil {
			at = s.requiredAt
		}
		where := ""
		if s.requiredAt == nil && requiredAt != nil {
			where = fmt.Sprintf(" (x-idempotency.required at line %d)", requiredAt.Line)
		}
		r.errorf(at, "x-idempotent: mode: async with an optional key%s; expected required: true, as an async request is found again only by its key", where)
	}
}

// statusPath reads an async operation's status: an absolute path with
// {key} as one whole segment and no other template parameter, since the
// key alone, in the request's scope, names the request.
func (r *reader) statusPath(v *yaml.Node) string {
	const (
		field    = "x-idempotent.status"
		expected = "expected a path with {key} as one of its segments, such as /exports/requests/{key}"
	)
	if !isString(v) {
		r.errorf(v, "%s: %s; %s", field, describe(v), expected)
		return ""
	}
	p := v.Value
	keys := 0
	for _, seg := range strings.Split(p, "/")[1:] {
		switch {
		case seg == "{key}":
			keys++
		case seg == "" || strings.ContainsAny(seg, "{}?#"):
			keys = -1
		}
		if keys < 0 {
			break
		}
	}
	if !strings.HasPrefix(p, "/") || keys != 1 {
		r.errorf(v, "%s: %s is not a status path; %s", field, quote(p), expected)
		return ""
	}
	return p
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
