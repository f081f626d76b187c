package idem

import (
	"testing"
	"unicode/utf8"
)

// TestUTF8CheckInPieces checks utf8Check against utf8.Valid on whole
// texts, each read in two pieces cut at every byte, and in pieces of one
// byte: characters cut between reads are carried, and nothing that is
// not UTF-8 gets through.
func TestUTF8CheckInPieces(t *testing.T) {
	t.Parallel()
	texts := []string{
		``, `{"a":"b"}`, `{"name":"café"}`, `"€ 𝄞 ✓"`, "\"\uFFFD\"", // U+FFFD written as UTF-8 is valid
		"{\"a\":\"caf\xe9\"}",    // Latin-1
		"\"\xe2\x82\"",           // a cut character
		"\"\xe2\x82",             // cut at the end of the body
		"\"\xf0\x9d\x84\x9e\xff", // a stray byte after a 4-byte character
		"\"\xc0\xaf\"",           // an overlong encoding
		"\"\xed\xa0\x80\"",       // a surrogate
		"\x80",
	}
	for _, text := range texts {
		want := utf8.ValidString(text)
		check := func(pieces ...string) {
			var u utf8Check
			ok := true
			for _, p := range pieces {
				ok = u.scan([]byte(p)) && ok
			}
			ok = u.end() && ok
			if ok != want {
				t.Errorf("%q read as %q: valid %v, want %v", text, pieces, ok, want)
			}
		}
		for i := 0; i <= len(text); i++ {
			check(text[:i], text[i:])
		}
		var bytes []string
		for i := range len(text) {
			bytes = append(bytes, text[i:i+1])
		}
		check(bytes...)
	}
}
