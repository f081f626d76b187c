package idem

import (
	"errors"
	"fmt"
	"strings"
)

// HeaderKey is the request header that carries the idempotency key.
const HeaderKey = "Idempotency-Key"

// MaxKeyLen is the longest key accepted, in bytes after unquoting.
const MaxKeyLen = 255

// ErrNoKey reports a request without an Idempotency-Key header.
var ErrNoKey = errors.New("no Idempotency-Key header")

// KeyError describes a malformed key.
type KeyError struct {
	Reason string
}

func (e *KeyError) Error() string { return "invalid Idempotency-Key: " + e.Reason }

// ParseKey validates the values of the Idempotency-Key header and returns
// the key. A key is 1 to 255 printable ASCII characters; a value written as
// an RFC 8941 sf-string ("...", with \" and \\ escapes) is unquoted first.
func ParseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrNoKey
	case 1:
	default:
		return "", &KeyError{Reason: fmt.Sprintf("the header appears %d times; send it exactly once", len(values))}
	}
	v := strings.Trim(values[0], " \t")
	if joined(v) {
		// A proxy may merge repeated header lines into one, joined by
		// commas: the same request must get the same answer either way.
		return "", &KeyError{Reason: "the header holds more than one value, joined by a comma as a proxy joins repeated header lines; send it exactly once, and quote a key that contains a comma as an RFC 8941 string"}
	}
	if strings.HasPrefix(v, `"`) {
		s, err := unquoteSFString(v)
		if err != nil {
			return "", err
		}
		v = s
	}
	if v == "" {
		return "", &KeyError{Reason: "the key is empty"}
	}
	if len(v) > MaxKeyLen {
		return "", &KeyError{Reason: fmt.Sprintf("the key is %d characters long; the limit is %d", len(v), MaxKeyLen)}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return "", &KeyError{Reason: fmt.Sprintf("byte %d (0x%02x) is not printable ASCII", i, c)}
		}
	}
	return v, nil
}

// joined reports whether a header value holds several values joined by
// commas (RFC 9110 section 5.3): a comma outside an sf-string's quotes.
func joined(v string) bool {
	quoted, escaped := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return true
		}
	}
	return false
}

// unquoteSFString decodes an RFC 8941 section 3.3.3 string.
func unquoteSFString(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", &KeyError{Reason: "a quoted key must end with a double quote"}
	}
	inner := v[1 : len(v)-1]
	var b strings.Builder
	b.Grow(len(inner))
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", &KeyError{Reason: `in a quoted key a backslash may only escape " or \`}
			}
			b.WriteByte(inner[i])
		case c == '"':
			return "", &KeyError{Reason: `a quoted key must escape an inner " as \"`}
		case c < 0x20 || c > 0x7e:
			return "", &KeyError{Reason: fmt.Sprintf("byte %d (0x%02x) is not printable ASCII", i+1, c)}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
