package idemtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/idem"
)

// KeyPart is where one part of an operation's idempotency key goes when
// the operation does not read it from the Idempotency-Key header, and
// what values the part takes.
type KeyPart struct {
	// Source is the header, the query parameter, or the member of a JSON
	// body or field of a form body, named by a JSON pointer (/po_number).
	Source idem.KeySource
	// Integer says the part is an integer: the checks send random
	// positive integers, in a JSON body as numbers.
	Integer bool
	// UUID says the part is a string of format uuid: the checks send
	// random UUIDs. Other parts get idemtest-<random text>.
	UUID bool
}

// keyValues are a key as the checks send it: one value per part of the
// request's Key, or the Idempotency-Key header's value alone.
type keyValues []string

// newKey returns fresh values for each part of the request's key, so
// that each check's requests are new to the server.
func (r Request) newKey() keyValues {
	if len(r.Key) == 0 {
		return keyValues{NewKey()}
	}
	values := make(keyValues, len(r.Key))
	for i, p := range r.Key {
		switch {
		case p.Integer:
			// Positive, and within an int32, whatever the part's Go type.
			values[i] = strconv.FormatInt(int64(rand.Int32N(math.MaxInt32))+1, 10)
		case p.UUID:
			values[i] = newUUID()
		default:
			values[i] = NewKey()
		}
	}
	return values
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], rand.Uint64())
	binary.BigEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// describe words the key's values where they go, for the checks' errors.
func (r Request) describe(key keyValues) string {
	if len(r.Key) == 0 {
		return idem.HeaderKey + " " + key[0]
	}
	words := make([]string, len(r.Key))
	for i, p := range r.Key {
		words[i] = fmt.Sprintf("%s %s", p.Source, key[i])
	}
	return strings.Join(words, ", ")
}

// request builds the operation's request with body, and key's values
// where the operation reads its key; it returns the body it sends.
func (c *client) request(ctx context.Context, key keyValues, body []byte) (*http.Request, []byte, error) {
	header := make(http.Header, len(c.req.Header)+1)
	for name, values := range c.req.Header {
		header[name] = slices.Clone(values)
	}
	path := c.req.Path
	if len(c.req.Key) == 0 {
		header.Set(idem.HeaderKey, key[0])
	} else {
		var err error
		if path, body, err = c.req.place(header, path, body, key); err != nil {
			return nil, nil, err
		}
	}
	r, err := http.NewRequestWithContext(ctx, c.req.Method, c.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("idemtest: the request: %w", err)
	}
	r.Header = header
	return r, body, nil
}

// place puts key's values at the request's key parts: into header, the
// query of path, and body, whose new path and body it returns.
func (r Request) place(header http.Header, path string, body []byte, key keyValues) (string, []byte, error) {
	var inBody []int
	for i, p := range r.Key {
		switch p.Source.In {
		case idem.KeyInHeader:
			// Drop any spelling of the name the request has, so that the
			// header is sent once.
			for name := range header {
				if strings.EqualFold(name, p.Source.Name) {
					delete(header, name)
				}
			}
			header.Set(p.Source.Name, key[i])
		case idem.KeyInQuery:
			before, query, _ := strings.Cut(path, "?")
			values, err := url.ParseQuery(query)
			if err != nil {
				return "", nil, fmt.Errorf("idemtest: the query of Request.Path %q: %w", path, err)
			}
			values.Set(p.Source.Name, key[i])
			path = before + "?" + values.Encode()
		case idem.KeyInBody:
			inBody = append(inBody, i)
		default:
			return "", nil, fmt.Errorf("idemtest: Request.Key[%d] is in %q; expected %q, %q or %q", i, p.Source.In, idem.KeyInHeader, idem.KeyInQuery, idem.KeyInBody)
		}
	}
	if len(inBody) == 0 {
		return path, body, nil
	}
	var err error
	if r.isForm() {
		body, err = r.placeForm(body, key, inBody)
	} else {
		body, err = r.placeJSON(body, key, inBody)
	}
	return path, body, err
}

// isForm reports whether the request's body is a URL-encoded form, whose
// key parts are fields; any other body's are JSON members.
func (r Request) isForm() bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-www-form-urlencoded"
}

// placeForm sets the form fields of the key parts at indexes parts.
func (r Request) placeForm(body []byte, key keyValues, parts []int) ([]byte, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("idemtest: the form body: %w", err)
	}
	for _, i := range parts {
		name, err := formField(r.Key[i].Source.Name)
		if err != nil {
			return nil, err
		}
		values.Set(name, key[i])
	}
	return []byte(values.Encode()), nil
}

// formField is the name of the form field a pointer names: its one token.
func formField(pointer string) (string, error) {
	tokens, err := pointerTokens(pointer)
	if err != nil {
		return "", err
	}
	if len(tokens) != 1 {
		return "", fmt.Errorf("idemtest: the key part %s is in a form body, whose fields are not nested; expected a pointer of one token, such as /po_number", pointer)
	}
	return tokens[0], nil
}

// placeJSON sets the JSON body's members of the key parts at indexes
// parts, replacing their values, or adding them and the objects on
// their way where the body lacks them: a string, or for an integer part
// a number.
func (r Request) placeJSON(body []byte, key keyValues, parts []int) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("idemtest: the key is in the body, at %s, and the request has no body; set Request.Body", r.Key[parts[0]].Source.Name)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("idemtest: the key is in the body, and the body is not JSON (%v); set Request.Body to a JSON body, or its Content-Type to a form's", err)
	}
	for _, i := range parts {
		p := r.Key[i]
		tokens, err := pointerTokens(p.Source.Name)
		if err != nil {
			return nil, err
		}
		var value any = key[i]
		if p.Integer {
			value = json.Number(key[i])
		}
		if err := setMember(doc, tokens, value); err != nil {
			return nil, fmt.Errorf("idemtest: the key part %s: %w", p.Source.Name, err)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the body as the test wrote it, < and > included
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("idemtest: the body with its key: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// setMember sets the member at tokens under doc to value.
func setMember(doc any, tokens []string, value any) error {
	for i, tok := range tokens {
		obj, ok := doc.(map[string]any)
		if !ok {
			return fmt.Errorf("%q is not an object in the body, so it cannot hold %q", "/"+strings.Join(tokens[:i], "/"), tok)
		}
		if i == len(tokens)-1 {
			obj[tok] = value
			return nil
		}
		if obj[tok] == nil {
			obj[tok] = map[string]any{}
		}
		doc = obj[tok]
	}
	return nil
}

// pointerTokens are the unescaped tokens of a JSON pointer.
func pointerTokens(pointer string) ([]string, error) {
	if !strings.HasPrefix(pointer, "/") || len(pointer) < 2 {
		return nil, errors.New("idemtest: the key part " + strconv.Quote(pointer) + " in the body is not a JSON pointer to a member; expected one such as /client_reference")
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, tok := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// bodyKeyTokens are the pointers' tokens of the key's parts in the body,
// which a changed request must leave alone.
func (r Request) bodyKeyTokens() [][]string {
	var skip [][]string
	for _, p := range r.Key {
		if p.Source.In != idem.KeyInBody {
			continue
		}
		if tokens, err := pointerTokens(p.Source.Name); err == nil {
			skip = append(skip, tokens)
		}
	}
	return skip
}

// changed is the body of the changed-request check: Changed, or one
// derived from Body by changing a value that is not a part of the key,
// since changing one of those would make another key, not a reuse.
func (r Request) changed() ([]byte, error) {
	if r.Changed != nil {
		return r.Changed, nil
	}
	if r.isForm() {
		return changeForm(r.Body, r.bodyKeyTokens())
	}
	return changeJSON(r.Body, r.bodyKeyTokens())
}
