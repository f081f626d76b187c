package idem

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// CanonicalWriter writes a request's canonical form (see Fingerprint)
// straight into a SHA-256 hash, value by value. The generated code writes
// each annotated operation's request with it from the typed fields, in
// canonical key order, and hands the parts it cannot type (unions,
// free-form objects, types with their own JSON encoding) to Value. What
// it writes equals Fingerprint's canonical form byte for byte, so a key
// stored before keeps matching its request.
//
// Get one with NewCanonicalWriter and end it with Sum. Write keys and
// values in order; commas are the writer's business.
type CanonicalWriter struct {
	h   hash.Hash
	buf []byte // pending bytes, flushed into h a few KiB at a time
	// comma is set after a value, so that the next key or array element
	// is preceded by one.
	comma bool
	err   error
}

// canonicalFlush is the size at which pending bytes go into the hash: a
// large body is hashed without its canonical form held whole.
const canonicalFlush = 4096

var canonicalWriters = sync.Pool{New: func() any {
	return &CanonicalWriter{h: sha256.New(), buf: make([]byte, 0, canonicalFlush+512)}
}}

// NewCanonicalWriter returns an empty writer.
func NewCanonicalWriter() *CanonicalWriter {
	w := canonicalWriters.Get().(*CanonicalWriter)
	w.h.Reset()
	w.buf, w.comma, w.err = w.buf[:0], false, nil
	return w
}

// Sum returns the SHA-256 of what was written, or the first error a value
// gave (a NaN, a type that fails to encode). The writer must not be used
// after.
func (w *CanonicalWriter) Sum() ([]byte, error) {
	defer canonicalWriters.Put(w)
	if w.err != nil {
		return nil, w.err
	}
	w.h.Write(w.buf)
	return w.h.Sum(make([]byte, 0, sha256.Size)), nil
}

// value starts a value: a comma if one came before at this level.
func (w *CanonicalWriter) value() {
	if w.comma {
		w.buf = append(w.buf, ',')
	}
	w.comma = true
	if len(w.buf) >= canonicalFlush && w.h != nil {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

// BeginObject starts an object; its keys must come in canonical order.
func (w *CanonicalWriter) BeginObject() {
	w.value()
	w.buf = append(w.buf, '{')
	w.comma = false
}

// Key writes an object's key; its value follows.
func (w *CanonicalWriter) Key(k string) {
	w.value()
	w.buf = appendCanonicalString(w.buf, k)
	w.buf = append(w.buf, ':')
	w.comma = false
}

// EndObject ends an object.
func (w *CanonicalWriter) EndObject() {
	w.buf = append(w.buf, '}')
	w.comma = true
}

// BeginArray starts an array.
func (w *CanonicalWriter) BeginArray() {
	w.value()
	w.buf = append(w.buf, '[')
	w.comma = false
}

// EndArray ends an array.
func (w *CanonicalWriter) EndArray() {
	w.buf = append(w.buf, ']')
	w.comma = true
}

// Null writes null.
func (w *CanonicalWriter) Null() {
	w.value()
	w.buf = append(w.buf, "null"...)
}

// Bool writes true or false.
func (w *CanonicalWriter) Bool(b bool) {
	w.value()
	w.buf = strconv.AppendBool(w.buf, b)
}

// String writes a string as encoding/json spells it, with any invalid
// UTF-8 as U+FFFD.
func (w *CanonicalWriter) String(s string) {
	w.value()
	w.buf = appendCanonicalString(w.buf, s)
}

// Int writes an integer.
func (w *CanonicalWriter) Int(i int64) {
	w.value()
	w.buf = strconv.AppendInt(w.buf, i, 10)
}

// Uint writes an unsigned integer.
func (w *CanonicalWriter) Uint(u uint64) {
	w.value()
	w.buf = strconv.AppendUint(w.buf, u, 10)
}

// Float64 writes a float64 as its canonical number.
func (w *CanonicalWriter) Float64(f float64) { w.float(f, 64) }

// Float32 writes a float32 as its canonical number: encoding/json's
// shortest float32 spelling, read back as a JSON number.
func (w *CanonicalWriter) Float32(f float32) { w.float(float64(f), 32) }

func (w *CanonicalWriter) float(f float64, bits int) {
	w.value()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.fail(fmt.Errorf("encode request: json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits)))
		return
	}
	start := len(w.buf)
	w.buf = appendJSONFloat(w.buf, f, bits)
	if lit := w.buf[start:]; bits == 32 || (len(lit) == 2 && lit[0] == '-' && lit[1] == '0') {
		// Canonical reads the literal back as a float64 (and -0 as 0).
		c := canonicalNumber(string(lit))
		w.buf = append(w.buf[:start], c...)
	}
}

// Time writes a time as encoding/json does: an RFC 3339 string.
func (w *CanonicalWriter) Time(t time.Time) {
	w.value()
	b, err := t.MarshalJSON()
	if err != nil {
		w.fail(fmt.Errorf("encode request: %w", err))
		return
	}
	// RFC 3339 needs no escaping: the quoted text is canonical as it is.
	w.buf = append(w.buf, b...)
}

// Form writes a form body as sent (see PostForm): an object of each
// field's values in order, or null when there is none.
func (w *CanonicalWriter) Form(form url.Values) {
	if form == nil {
		w.Null()
		return
	}
	keys, ok := CanonicalKeys(form)
	if !ok {
		w.Value(form)
		return
	}
	w.BeginObject()
	for _, k := range keys {
		w.Key(k)
		writeSlice(w, form[k], func(w *CanonicalWriter, v *string) { w.String(*v) })
	}
	w.EndObject()
}

// Value writes any value the way Fingerprint does: encoded by
// encoding/json, read back, with the values at the JSON pointers in
// exclude removed, and written in canonical form. It is the fallback for
// what the generated code cannot write field by field.
func (w *CanonicalWriter) Value(v any, exclude ...string) {
	raw, err := json.Marshal(v)
	if err != nil {
		w.value()
		w.fail(fmt.Errorf("encode request: %w", err))
		return
	}
	d, err := decodeJSON(raw)
	if err != nil {
		w.value()
		w.fail(err)
		return
	}
	for _, p := range exclude {
		d = removePointer(d, p)
	}
	w.decoded(d)
}

func (w *CanonicalWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// decoded writes a value as decodeJSON returns it.
func (w *CanonicalWriter) decoded(v any) {
	switch v := v.(type) {
	case nil:
		w.Null()
	case bool:
		w.Bool(v)
	case json.Number:
		w.value()
		w.buf = append(w.buf, canonicalNumber(string(v))...)
	case string:
		w.String(v)
	case []any:
		w.BeginArray()
		for _, e := range v {
			w.decoded(e)
		}
		w.EndArray()
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.BeginObject()
		for _, k := range keys {
			w.Key(k)
			w.decoded(v[k])
		}
		w.EndObject()
	}
}

// writeSlice writes a slice as an array, each element by write, or null
// for a nil slice, as encoding/json does.
func writeSlice[S ~[]E, E any](w *CanonicalWriter, s S, write func(*CanonicalWriter, *E)) {
	if s == nil {
		w.Null()
		return
	}
	w.BeginArray()
	for i := range s {
		write(w, &s[i])
	}
	w.EndArray()
}

// CanonicalKeys returns a map's keys in canonical order, or false when
// one is not valid UTF-8: encoding/json reads such keys back as U+FFFD,
// where they may collide, so the map must go through Value.
func CanonicalKeys[M ~map[K]V, K ~string, V any](m M) ([]K, bool) {
	keys := make([]K, 0, len(m))
	for k := range m {
		if !utf8.ValidString(string(k)) {
			return nil, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, true
}

// appendCanonicalString appends s as a JSON string, escaped as
// encoding/json escapes it (HTML characters and U+2028/9 included), with
// each byte of invalid UTF-8 as U+FFFD: what Fingerprint's round trip
// through encoding/json makes of it.
func appendCanonicalString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json spells a float of this
// many bits: the shortest decimal that reads back as f, in exponent form
// only when very small or very large, with e-07 as e-7.
func appendJSONFloat(b []byte, f float64, bits int) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
