package annotation

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// extensions are the specification extensions the reader takes as its
// own; any other starting with x-idemp is reported as a misspelling.
var extensions = []string{"x-idempotency", "x-idempotent", "x-idempotency-ttl"}

// accepted lists the keys of each mapping of the annotations, by the
// mapping's dotted name, in the order messages name them. The reader
// refuses any other key, so a key works only once it is listed here,
// and docs/ANNOTATIONS.md must name each one (TestDocsReferenceComplete).
var accepted = map[string][]string{
	"x-idempotency":            {"ttl", "lease", "required", "key", "scope", "max-body", "validate"},
	"x-idempotency.key":        {"header", "query", "body"},
	"x-idempotency.scope":      {"header", "function"},
	"x-idempotent":             {"required", "key", "ttl", "lease", "mode", "recovery-points", "status", "abandoned", "complete-after", "fingerprint", "scope", "max-body", "validate"},
	"x-idempotent.key":         {"header", "query", "body"},
	"x-idempotent.fingerprint": {"exclude", "include"},
	"x-idempotent.scope":       {"header", "function"},
}

// known reports whether key is one the mapping field accepts, and
// reports it as unknown when it is not.
func (r *reader) known(key *yaml.Node, field string) bool {
	keys := accepted[field]
	if slices.Contains(keys, key.Value) {
		return true
	}
	r.errorf(key, "%s: unknown key %s; expected %s", field, quote(key.Value), oneOf(keys))
	return false
}

// oneOf words a choice of keys: "exclude", "header or function", or
// "one of ttl, lease, required".
func oneOf(keys []string) string {
	switch len(keys) {
	case 1:
		return keys[0]
	case 2:
		return keys[0] + " or " + keys[1]
	}
	return "one of " + strings.Join(keys, ", ")
}

// mappingOf words the mapping field expects: "a mapping with key
// exclude", or "a mapping with keys ttl, lease, required".
func mappingOf(field string) string {
	keys := accepted[field]
	if len(keys) == 1 {
		return "a mapping with key " + keys[0]
	}
	return "a mapping with keys " + strings.Join(keys, ", ")
}
