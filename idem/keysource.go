package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Where a KeySource reads from.
const (
	KeyInHeader = "header"
	KeyInQuery  = "query"
	KeyInBody   = "body"
)

// KeySource is a place an operation takes its idempotency key, or a part
// of it, from when that is not the Idempotency-Key header: a webhook's
// delivery id in its own header, a client reference in the body. The
// spec's key annotation says; the generated handler reads the values from
// the typed request and hands them to the engine with WithKey.
type KeySource struct {
	// In is KeyInHeader, KeyInQuery or KeyInBody.
	In string
	// Name is the header's or query parameter's name, as the spec spells
	// it, or the JSON pointer into the body (a form field's name as a
	// pointer: /po_number).
	Name string
}

// String names the source as the answers do: the Webhook-Id header, the
// delivery query parameter, /client_reference in the body.
func (s KeySource) String() string {
	switch s.In {
	case KeyInHeader:
		return "the " + s.Name + " header"
	case KeyInQuery:
		return "the " + s.Name + " query parameter"
	}
	return s.Name + " in the body"
}

// noun is what a request's key is called in the answers about it.
func (s KeySource) noun() string {
	switch s.In {
	case KeyInHeader:
		return s.Name
	case KeyInQuery:
		return s.Name + " query parameter"
	}
	return s.Name[strings.LastIndexByte(s.Name, '/')+1:]
}

// KeyValue is the value a request holds at one KeySource. Present is
// false when the request does not have it: an optional parameter or
// member left out.
type KeyValue struct {
	Value   string
	Present bool
}

type keyValuesKey struct{}

// WithKey returns ctx carrying the request's values at its operation's
// key sources (Operation.KeyFrom), in their order, for Serve and
// ServePhased. The generated handler reads them from the typed request.
func WithKey(ctx context.Context, values ...KeyValue) context.Context {
	return context.WithValue(ctx, keyValuesKey{}, values)
}

// errNoKeyValues reports an operation with key sources served without
// their values in the context.
var errNoKeyValues = errors.New("idem: the operation takes its key from the request's fields, and the context holds no values for them; mount the generated handler, which adds them with WithKey")

// keyOf returns the request's key from the values at op's key sources:
// one value as it is, several as a JSON array of them, which no value
// of a single source can be confused with since an operation's key is
// always read from the same sources. A request without any of them has
// no key (ErrNoKey); one without some of them is refused.
func (op *Operation) keyOf(ctx context.Context) (string, error) {
	values, ok := ctx.Value(keyValuesKey{}).([]KeyValue)
	if !ok || len(values) != len(op.KeyFrom) {
		return "", errNoKeyValues
	}
	var missing []string
	for i, v := range values {
		if !v.Present {
			missing = append(missing, op.KeyFrom[i].String())
		}
	}
	switch {
	case len(missing) == len(values):
		return "", ErrNoKey
	case len(missing) > 0 && op.KeyOptional:
		return "", &KeyError{Reason: fmt.Sprintf("the request has a part of the key, but not %s; send every part of the key, or none to run without one", strings.Join(missing, " or "))}
	case len(missing) > 0:
		return "", fmt.Errorf("%w: %s", ErrNoKey, strings.Join(missing, ", "))
	}
	parts := make([]string, len(values))
	for i, v := range values {
		if why := keyValueInvalid(v.Value); why != "" {
			return "", &KeyError{Reason: op.KeyFrom[i].String() + " " + why}
		}
		parts[i] = v.Value
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(parts) // strings always encode
	key := strings.TrimSuffix(b.String(), "\n")
	if len(key) > MaxKeyLen {
		return "", &KeyError{Reason: fmt.Sprintf("the key, its parts written as a JSON array, is %d bytes long; the limit is %d", len(key), MaxKeyLen)}
	}
	return key, nil
}

// keyValueInvalid says why v cannot be (a part of) a key, or returns "".
// Values from a body or a query may be any text without control
// characters; the Idempotency-Key header's own rule (printable ASCII)
// stays with ParseKey.
func keyValueInvalid(v string) string {
	switch {
	case v == "":
		return "is empty"
	case len(v) > MaxKeyLen:
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(v), MaxKeyLen)
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "holds a control character"
	}
	return ""
}

// keyNoun is what op's key is called in the answers about it.
func (op *Operation) keyNoun() string {
	switch len(op.KeyFrom) {
	case 0:
		return HeaderKey
	case 1:
		return op.KeyFrom[0].noun()
	}
	return "idempotency key"
}

// keySources words op's key sources: the Webhook-Id header, or the
// X-Account header and /po_number in the body.
func keySources(from []KeySource) string {
	names := make([]string, len(from))
	for i, s := range from {
		names[i] = s.String()
	}
	if n := len(names); n > 1 {
		return strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return names[0]
}

// gateKey checks the headers and query parameters of the gate's key
// sources before the parameters' binder would refuse a request without
// one, or with one twice, with its generic error. It returns the problem
// to answer with, or nil.
func (g *Gate) gateKey(r *http.Request) *Problem {
	var query map[string][]string
	for _, s := range g.Key {
		var values []string
		switch s.In {
		case KeyInHeader:
			values = r.Header.Values(s.Name)
		case KeyInQuery:
			if query == nil {
				query = r.URL.Query()
			}
			values = query[s.Name]
		default:
			continue
		}
		switch {
		case len(values) == 0 && g.KeyRequired:
			return missingKeyProblem(g.Operation, g.Key)
		case len(values) > 1:
			err := &KeyError{Reason: fmt.Sprintf("%s appears %d times; send it exactly once", s, len(values))}
			return invalidKeyProblem(err, g.Key, "")
		case len(values) == 1 && values[0] == "" && g.KeyRequired:
			// The parameters' binder would refuse it with a generic error.
			return invalidKeyProblem(&KeyError{Reason: s.String() + " is empty"}, g.Key, "")
		case len(values) == 1 && s.In == KeyInHeader && joined(values[0]):
			err := &KeyError{Reason: s.String() + " holds more than one value, joined by a comma as a proxy joins repeated header lines; send it exactly once"}
			return invalidKeyProblem(err, g.Key, "")
		}
	}
	return nil
}
