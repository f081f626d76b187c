package annotation

import "strings"

// validRecoveryPoint reports whether name can become a Go identifier by
// GoName: an ASCII letter, then ASCII letters, digits, _ or -. Non-ASCII
// letters are refused because many have no upper case, and the generated
// name must be exported.
func validRecoveryPoint(name string) bool {
	if name == "" || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// GoName converts a valid recovery point, written in snake or kebab case,
// to the CamelCase Go identifier the generated code uses for it:
// "payment_created" and "payment-created" both become "PaymentCreated".
// Read reports recovery points of one operation that share a Go name.
func GoName(point string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(point, func(r rune) bool { return r == '_' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

// pointerProblem says why s is not a JSON pointer (RFC 6901), or returns
// "". Whether the pointer names a field of the request body is checked
// elsewhere, against the schema.
func pointerProblem(s string) string {
	if !strings.HasPrefix(s, "/") {
		return `it must start with "/"`
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return `"~" must be followed by 0 or 1, as in ~0 for "~" and ~1 for "/"`
		}
	}
	return ""
}
