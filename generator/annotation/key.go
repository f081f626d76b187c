package annotation

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Where a KeyPart is read from.
const (
	KeyInHeader = "header"
	KeyInQuery  = "query"
	KeyInBody   = "body"
)

// Key says where an operation's key is read from when that is not the
// Idempotency-Key header: one part, or several for a composite key. The
// zero value is the Idempotency-Key header.
type Key struct {
	Parts []KeyPart
	// Default is true when the key comes from x-idempotency.
	Default bool
	// Pos is where the key's value is written.
	Pos Position
}

// KeyPart is one place a key is read from: a header or query parameter
// by its name, or a member of the body by a JSON pointer (a form field's
// name written as a pointer). Whether the operation has it is checked
// against the spec elsewhere.
type KeyPart struct {
	In   string // KeyInHeader, KeyInQuery or KeyInBody
	Name string
	Pos  Position
}

// String is the part as the annotation writes it: {header: Webhook-Id}.
func (p KeyPart) String() string { return "{" + p.In + ": " + p.Name + "}" }

const keyExpected = "expected a mapping such as {header: Webhook-Id}, {query: delivery} or {body: /client_reference}, or a list of them for a key made of several parts"

// key reads a key: one part's mapping, or a list of them. field is
// x-idempotency.key or x-idempotent.key.
func (r *reader) key(field string, v *yaml.Node) *Key {
	k := &Key{Pos: r.pos(v)}
	switch v.Kind {
	case yaml.MappingNode:
		p, ok := r.keyPart(field, v)
		if !ok {
			return nil
		}
		k.Parts = []KeyPart{p}
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			r.errorf(v, "%s: the list is empty; %s", field, keyExpected)
			return nil
		}
		seen := map[string]int{}
		valid := true
		for i, item := range v.Content {
			item = resolve(item)
			p, ok := r.keyPart(fmt.Sprintf("%s[%d]", field, i), item)
			if !ok {
				valid = false
				continue
			}
			id := p.In + " " + p.Name
			if p.In == KeyInHeader {
				id = strings.ToLower(id) // as HTTP compares them
			}
			if first, dup := seen[id]; dup {
				r.errorf(item, "%s[%d]: %s repeats %s[%d]; expected each part of the key once", field, i, p, field, first)
				valid = false
				continue
			}
			seen[id] = i
			k.Parts = append(k.Parts, p)
		}
		if !valid {
			return nil
		}
	default:
		r.errorf(v, "%s: %s; %s", field, describe(v), keyExpected)
		return nil
	}
	return k
}

// keyPart reads one part of a key: a mapping with one of header, query
// or body.
func (r *reader) keyPart(field string, v *yaml.Node) (KeyPart, bool) {
	if v.Kind != yaml.MappingNode {
		r.errorf(v, "%s: %s; %s", field, describe(v), keyExpected)
		return KeyPart{}, false
	}
	fields := r.unique(r.fields(v), field, all)
	if len(fields) == 0 {
		r.errorf(v, "%s: the mapping names no source; %s", field, keyExpected)
		return KeyPart{}, false
	}
	if len(fields) > 1 {
		r.errorf(fields[1].key, "%s: a part is read from one place, and this mapping names %d; for a key made of several parts, write a list such as [{header: X-Account-Id}, {body: /po_number}]", field, len(fields))
		return KeyPart{}, false
	}
	f := fields[0]
	if !r.known(f.key, keyField(field)) {
		return KeyPart{}, false
	}
	p := KeyPart{In: f.key.Value, Pos: r.pos(f.value)}
	at := field + "." + p.In
	if !isString(f.value) || f.value.Value == "" {
		r.errorf(f.value, "%s: %s; expected %s", at, describeOrEmpty(f.value), keyNameExpected(p.In))
		return KeyPart{}, false
	}
	p.Name = f.value.Value
	switch p.In {
	case KeyInHeader:
		if !headerToken(p.Name) {
			r.errorf(f.value, "%s: %s is not a header name; expected %s", at, quote(p.Name), keyNameExpected(p.In))
			return KeyPart{}, false
		}
	case KeyInBody:
		if problem := pointerProblem(p.Name); problem != "" {
			r.errorf(f.value, "%s: %s is not a JSON pointer (%s); expected %s", at, quote(p.Name), problem, keyNameExpected(p.In))
			return KeyPart{}, false
		}
	}
	return p, true
}

// keyField is the name accepted lists a key part's keys under: the
// field without a list index.
func keyField(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 {
		return field[:i]
	}
	return field
}

func keyNameExpected(in string) string {
	switch in {
	case KeyInHeader:
		return "a header name such as Webhook-Id"
	case KeyInQuery:
		return "a query parameter's name such as delivery"
	}
	return "a JSON pointer into the body such as /client_reference"
}

func describeOrEmpty(v *yaml.Node) string {
	if isString(v) && v.Value == "" {
		return "the value is empty"
	}
	return describe(v)
}
