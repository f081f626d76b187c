package generator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keySpec is a spec whose operations the refusals annotate: KEY is
// replaced by the key of /things, and SCOPE by its scope.
const keySpec = `openapi: 3.0.3
info: {title: keys, version: "1"}
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent:
        SCOPE
        key: KEY
      parameters:
        - {name: X-Delivery, in: header, required: true, schema: {type: string}}
        - {name: X-Tenant, in: header, required: true, schema: {type: string}}
        - {name: X-Tags, in: header, required: true, schema: {type: array, items: {type: string}}}
        - {name: q, in: query, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [ref, flag, nested]
              properties:
                ref: {type: string}
                note: {type: string}
                flag: {type: boolean}
                nested: {type: object, properties: {inner: {type: string}}}
      responses:
        "201": {description: Created.}
  /empty:
    post:
      operationId: emptyBody
      x-idempotent:
        key: EMPTYKEY
      responses:
        "204": {description: Done.}
  /uploads:
    post:
      operationId: upload
      x-idempotent:
        key: UPLOADKEY
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              required: [name]
              properties:
                name: {type: string}
      responses:
        "201": {description: Created.}
`

// TestKeyPlacementRefusals: each key the operation cannot have is refused
// when generating, at the line and column of what names it, saying what
// was expected.
func TestKeyPlacementRefusals(t *testing.T) {
	t.Parallel()
	const fine = "{header: X-Delivery}"
	cases := []struct {
		name, key, scope, empty, upload string
		at                              string // the text the error points at, on its line
		want                            string
	}{
		{name: "undeclared header", key: "{header: X-Missing}", at: "X-Missing", want: `declares no header parameter "X-Missing"; expected one of X-Delivery, X-Tags, X-Tenant`},
		{name: "optional query", key: "{query: q}", at: "q}", want: "the q parameter is optional, and the key is required"},
		{name: "array header", key: "{header: X-Tags}", at: "X-Tags", want: "is of type array; expected type string"},
		{name: "undeclared member", key: "{body: /nope}", at: "/nope", want: `declares no "nope" under "/"; expected one of flag, nested, note, ref`},
		{name: "optional member", key: "{body: /note}", at: "/note", want: "/note is not required in the request body's schema, and the key is required"},
		{name: "optional nested member", key: "{body: /nested/inner}", at: "/nested/inner", want: "/nested/inner is not required"},
		{name: "boolean member", key: "{body: /flag}", at: "/flag", want: "is of type boolean"},
		{name: "the scope's header", key: "{header: X-Tenant}", scope: "scope: {header: X-Tenant}", at: "X-Tenant}", want: "the X-Tenant header scopes the keys, and cannot be one too"},
		{name: "no body", key: fine, empty: "{body: /ref}", at: "/ref", want: "the operation has no request body"},
		{name: "multipart body", key: fine, upload: "{body: /name}", at: "/name", want: "a key in the body needs a JSON or form-encoded body"},
		{name: "a string", key: "Webhook-Id", at: "Webhook-Id", want: "expected a mapping such as {header: Webhook-Id}"},
		{name: "two sources in one part", key: "{header: X-Delivery, body: /ref}", at: "body:", want: "this mapping names 2; for a key made of several parts, write a list"},
		{name: "an empty list", key: "[]", at: "[]", want: "the list is empty"},
		{name: "not a header name", key: `{header: "X Delivery"}`, at: `"X Delivery"`, want: "is not a header name"},
		{name: "not a pointer", key: "{body: ref}", at: "ref}", want: "is not a JSON pointer"},
		{name: "a part twice", key: "[{header: X-Delivery}, {header: x-delivery}]", at: "{header: x-delivery}", want: "repeats x-idempotent.key[0]"},
		{name: "unknown source", key: "{cookie: id}", at: "cookie", want: `unknown key "cookie"; expected one of header, query, body`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			or := func(s, def string) string {
				if s == "" {
					return def
				}
				return s
			}
			spec := strings.NewReplacer("SCOPE", or(c.scope, "ttl: 1h"), "EMPTYKEY", or(c.empty, "{header: Idempotency-Key}"), "UPLOADKEY", or(c.upload, "{header: Idempotency-Key}"), "KEY", c.key).Replace(keySpec)
			dir := t.TempDir()
			path := filepath.Join(dir, "openapi.yaml")
			if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := generateFrom(configFor(t, dir, "openapi.yaml", ""))
			if err == nil {
				t.Fatalf("key %s generated; want it refused", c.key)
			}
			line, col := position(spec, c)
			at := fmt.Sprintf("openapi.yaml:%d:%d: ", line, col)
			if !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant one at %s saying %q", err, at, c.want)
			}
		})
	}
}

// position is the line and column of c.at on the line of the key it
// tests.
func position(spec string, c struct {
	name, key, scope, empty, upload string
	at                              string
	want                            string
}) (int, int) {
	marker := "key: " + c.key
	switch {
	case c.empty != "":
		marker = "key: " + c.empty
	case c.upload != "":
		marker = "key: " + c.upload
	}
	for i, l := range strings.Split(spec, "\n") {
		if j := strings.Index(l, marker); j >= 0 {
			return i + 1, strings.Index(l, c.at) + 1
		}
	}
	return 0, 0
}
