package idem

import (
	"net/http"
	"unicode/utf8"
)

// JSON is UTF-8 (RFC 8259), and encoding/json decodes a byte sequence
// that is not as U+FFFD: two bodies that differ only there would decode,
// and so fingerprint, alike, and the second would replay the first's
// answer. A JSON body is checked before it is decoded, so that it is
// refused with a 400 instead.

// utf8Check checks a body read in pieces: a character cut at the end of
// one piece is carried to the next.
type utf8Check struct {
	carry [utf8.UTFMax]byte
	n     int
	bad   bool
}

// scan checks p, the next bytes read; false once anything read is not
// UTF-8.
func (u *utf8Check) scan(p []byte) bool {
	for u.n > 0 && len(p) > 0 && !u.bad {
		u.carry[u.n] = p[0]
		u.n++
		p = p[1:]
		if utf8.FullRune(u.carry[:u.n]) {
			r, size := utf8.DecodeRune(u.carry[:u.n])
			u.bad = r == utf8.RuneError && size == 1
			u.n = 0
		}
	}
	if u.bad {
		return false
	}
	for i := len(p) - 1; i >= 0 && i > len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				u.n = copy(u.carry[:], p[i:])
				p = p[:i]
			}
			break
		}
	}
	u.bad = !utf8.Valid(p)
	return !u.bad
}

// end checks the end of the body: no character may be cut there.
func (u *utf8Check) end() bool {
	u.bad = u.bad || u.n > 0
	return !u.bad
}

// notUTF8 is the answer to a JSON body that is not UTF-8.
func notUTF8() *Problem {
	return &Problem{
		Type:   TypeInvalidRequest,
		Title:  "Invalid request",
		Status: http.StatusBadRequest,
		Detail: "The request body is not valid UTF-8, which JSON requires. Send it encoded as UTF-8; it was not run, and its idempotency key was not used.",
	}
}
