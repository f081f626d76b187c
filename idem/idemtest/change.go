package idemtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ChangeJSON returns body with one value changed, in a way that keeps the
// value's type and shape: the first number found (members in name order,
// depth first) gains one, else the first boolean flips, else the first
// string's last character becomes another of its kind. It is how Check
// makes a different request when Request.Changed is nil.
func ChangeJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON (%v), so no changed request can be derived", err)
	}
	for _, change := range []func(any) (any, bool){changeNumber, changeBool, changeString} {
		if out, ok := walk(v, change); ok {
			return json.Marshal(out)
		}
	}
	return nil, errors.New("the body has no number, boolean or string to change")
}

// walk applies change to the first value it accepts, depth first, object
// members in name order.
func walk(v any, change func(any) (any, bool)) (any, bool) {
	if out, ok := change(v); ok {
		return out, true
	}
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if out, ok := walk(v[name], change); ok {
				v[name] = out
				return v, true
			}
		}
	case []any:
		for i := range v {
			if out, ok := walk(v[i], change); ok {
				v[i] = out
				return v, true
			}
		}
	}
	return nil, false
}

func changeNumber(v any) (any, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	if i, err := n.Int64(); err == nil {
		return i + 1, true
	}
	f, err := n.Float64()
	if err != nil {
		return nil, false
	}
	return f + 1, true
}

func changeBool(v any) (any, bool) {
	b, ok := v.(bool)
	return !b, ok
}

func changeString(v any) (any, bool) {
	s, ok := v.(string)
	if !ok || s == "" {
		return nil, false
	}
	r := []rune(s)
	last := &r[len(r)-1]
	switch {
	case *last >= '0' && *last <= '9':
		*last = '0' + (*last-'0'+1)%10
	case *last >= 'a' && *last <= 'z':
		*last = 'a' + (*last-'a'+1)%26
	case *last >= 'A' && *last <= 'Z':
		*last = 'A' + (*last-'A'+1)%26
	default:
		r = append(r, 'x')
	}
	return string(r), true
}
