package idemtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
)

// ChangeJSON returns body with one value changed, in a way that keeps the
// value's type and shape: the first number found (members in name order,
// depth first) gains one, else the first boolean flips, else the first
// string's last character becomes another of its kind. It is how Check
// makes a different request when Request.Changed is nil; there it leaves
// the members of the request's key alone.
func ChangeJSON(body []byte) ([]byte, error) { return changeJSON(body, nil) }

// changeJSON is ChangeJSON leaving the values at skip, pointers' tokens,
// as they are.
func changeJSON(body []byte, skip [][]string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON (%v), so no changed request can be derived", err)
	}
	for _, change := range []func(any) (any, bool){changeNumber, changeBool, changeString} {
		if out, ok := walk(v, nil, skip, change); ok {
			return json.Marshal(out)
		}
	}
	if len(skip) > 0 {
		return nil, errors.New("the body has no number, boolean or string to change but the key's own")
	}
	return nil, errors.New("the body has no number, boolean or string to change")
}

// walk applies change to the first value it accepts, depth first, object
// members in name order, passing over the values at skip: at is v's
// place, as a pointer's tokens.
func walk(v any, at []string, skip [][]string, change func(any) (any, bool)) (any, bool) {
	if slices.ContainsFunc(skip, func(s []string) bool { return slices.Equal(s, at) }) {
		return nil, false
	}
	if out, ok := change(v); ok {
		return out, true
	}
	at = at[:len(at):len(at)] // each member's place a slice of its own
	switch v := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if out, ok := walk(v[name], append(at, name), skip, change); ok {
				v[name] = out
				return v, true
			}
		}
	case []any:
		for i := range v {
			if out, ok := walk(v[i], append(at, strconv.Itoa(i)), skip, change); ok {
				v[i] = out
				return v, true
			}
		}
	}
	return nil, false
}

// changeForm returns a form body with one field changed, the first in
// name order that is not in skip (the key's fields, as one-token
// pointers) and has a value: an integer gains one, true and false flip,
// other text changes as ChangeJSON changes a string.
func changeForm(body []byte, skip [][]string) ([]byte, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("the form body does not parse (%v), so no changed request can be derived", err)
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if slices.ContainsFunc(skip, func(s []string) bool { return len(s) == 1 && s[0] == name }) || len(values[name]) == 0 {
			continue
		}
		v := values[name][0]
		if i, err := strconv.ParseInt(v, 10, 64); err == nil && i < math.MaxInt64 {
			values[name][0] = strconv.FormatInt(i+1, 10)
		} else if v == "true" || v == "false" {
			values[name][0] = strconv.FormatBool(v == "false")
		} else if out, ok := changeString(v); ok {
			values[name][0] = out.(string)
		} else {
			continue
		}
		return []byte(values.Encode()), nil
	}
	return nil, errors.New("the form body has no field with a value to change but the key's own")
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
