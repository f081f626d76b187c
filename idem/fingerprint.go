package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Params holds an operation's path, query or header parameters, by their
// names in the spec, for the fingerprint.
type Params map[string]any

// Fingerprint returns the SHA-256 of the canonical form of a request: the
// operation, its path, query and header parameters (the Idempotency-Key
// aside) and its decoded body. The body is the typed value the request
// decoded into, so key order, whitespace and number spelling in the
// client's bytes do not change the result. exclude lists JSON pointers
// into the body whose values do not count; the generated code leaves
// excluded parameters out of the Params.
func Fingerprint(operation string, path, query, header Params, body any, exclude []string) ([]byte, error) {
	doc := struct {
		Operation string `json:"operation"`
		Path      Params `json:"path,omitempty"`
		Query     Params `json:"query,omitempty"`
		Header    Params `json:"header,omitempty"`
		Body      any    `json:"body,omitempty"`
	}{operation, path, query, header, body}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("fingerprint %s: encode request: %w", operation, err)
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("fingerprint %s: %w", operation, err)
	}
	if m, ok := v.(map[string]any); ok {
		for _, p := range exclude {
			if b, ok := m["body"]; ok {
				m["body"] = removePointer(b, p)
			}
		}
	}
	w := NewCanonicalWriter()
	w.decoded(v)
	sum, err := w.Sum()
	if err != nil {
		return nil, fmt.Errorf("fingerprint %s: %w", operation, err)
	}
	return sum, nil
}

// Canonical rewrites a JSON document in canonical form: object keys sorted,
// no insignificant whitespace, numbers in one spelling (1, 1.0 and 1e0 are
// the same number). Types that re-encode unpredictably, such as the raw
// JSON of oneOf unions, are made deterministic by this pass.
func Canonical(data []byte) ([]byte, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	w := CanonicalWriter{} // no hash: the bytes stay in w.buf
	w.decoded(v)
	return w.buf, nil
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical JSON: data after the top-level value")
	}
	return v, nil
}

// canonicalNumber spells a JSON number the way encoding/json spells a
// float64, keeping integer literals exact so large IDs do not collide.
func canonicalNumber(lit string) string {
	if isIntegerLiteral(lit) {
		if lit == "-0" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return lit // out of range: still deterministic for the same text
	}
	if f == 0 {
		return "0"
	}
	abs := math.Abs(f)
	if abs < 1e21 && (abs >= 1e-6 || abs == 0) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	// Like encoding/json: e-07 becomes e-7.
	s := strconv.FormatFloat(f, 'e', -1, 64)
	if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
		s = s[:n-2] + s[n-1:]
	}
	return s
}

func isIntegerLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// removePointer deletes the value at an RFC 6901 pointer. An array element
// is replaced by null so that later indexes keep their meaning.
func removePointer(v any, pointer string) any {
	if pointer == "" || pointer[0] != '/' {
		return v
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	removeTokens(v, tokens)
	return v
}

func removeTokens(v any, tokens []string) {
	last := len(tokens) == 1
	switch v := v.(type) {
	case map[string]any:
		if last {
			delete(v, tokens[0])
			return
		}
		if c, ok := v[tokens[0]]; ok {
			removeTokens(c, tokens[1:])
		}
	case []any:
		i, err := strconv.Atoi(tokens[0])
		if err != nil || i < 0 || i >= len(v) {
			return
		}
		if last {
			v[i] = nil
			return
		}
		removeTokens(v[i], tokens[1:])
	}
}

// Form returns the form that the typed body of an operation with a form
// body was bound from, for its fingerprint: the request's Form (see
// WithRequest), which http.Request.ParseForm fills with the body's fields
// and then the URL query's, every field with its values in order. The
// typed body drops the fields its schema does not name (Stripe's
// metadata[...], say), and a change to them must not replay the other
// request's answer; a field of the query reaches the typed body as one of
// the body's would, and must count as one. body is the typed body: Form
// returns nil when it is nil (the request's body was of another media
// type) or the form is empty, as a typed body would be.
func Form[B any](ctx context.Context, body *B) url.Values {
	if body == nil {
		return nil
	}
	return requestForm(ctx)
}

// PostForm returns what Form returns for a form body: the form the typed
// body was bound from, body and query.
//
// Deprecated: code generated by this version calls Form, which also
// tells whether the request's body was a form.
func PostForm(ctx context.Context) url.Values {
	return requestForm(ctx)
}

func requestForm(ctx context.Context) url.Values {
	r := RequestFrom(ctx)
	if r == nil || len(r.Form) == 0 {
		return nil
	}
	return r.Form
}
