package annotation

import (
	"strings"

	"gopkg.in/yaml.v3"
)

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
