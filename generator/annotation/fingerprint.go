package annotation

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

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
