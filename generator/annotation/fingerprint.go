package annotation

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// fingerprint reads the fingerprint mapping: the entries of exclude,
// which do not count, and of include, which alone count. The two are not
// combined: exclude within include would make the reader work out which
// entries of one the other cancels, where include alone says it plainly.
func (r *reader) fingerprint(v *yaml.Node) (exclude, include []Pointer) {
	const field = "x-idempotent.fingerprint"
	if v.Kind != yaml.MappingNode {
		r.errorf(v, "%s: %s; expected %s", field, describe(v), mappingOf(field))
		return nil, nil
	}
	var excludeKey, includeKey *yaml.Node
	for _, f := range r.unique(r.fields(v), field, all) {
		if !r.known(f.key, field) {
			continue
		}
		switch f.key.Value {
		case "exclude":
			excludeKey = f.key
			exclude = r.pointers(field+".exclude", f.value)
		case "include":
			includeKey = f.key
			include = r.pointers(field+".include", f.value)
			if f.value.Kind == yaml.SequenceNode && len(f.value.Content) == 0 {
				// Only the operation's name would count: every request
				// with the same key would replay the first one's answer.
				r.errorf(f.value, "%s.include: the list is empty, which would leave only the operation's name in the fingerprint; expected the JSON pointers into the body and the parameter names that count, such as [/id, /data], or no include", field)
			}
		}
	}
	if excludeKey != nil && includeKey != nil {
		later, earlier := includeKey, excludeKey
		if later.Line < earlier.Line || (later.Line == earlier.Line && later.Column < earlier.Column) {
			later, earlier = earlier, later
		}
		r.errorf(later, "%s: %s cannot be combined with %s (line %d); expected include alone, listing only what counts (leave out of it what exclude would remove), or exclude alone", field, later.Value, earlier.Value, earlier.Line)
		return nil, nil
	}
	return exclude, include
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
