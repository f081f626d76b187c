package idemvalidate_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

const doc = `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /accounts/{account}/orders/{n}:
    parameters:
      - {name: account, in: path, required: true, schema: {type: string, pattern: "^acct_[a-z0-9]+$"}}
    post:
      operationId: createOrder
      parameters:
        - {name: n, in: path, required: true, schema: {type: integer, maximum: 10}}
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
        - {name: X-Request-Id, in: header, required: true, schema: {type: string, maxLength: 8}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [lines]
              properties:
                at: {type: string, format: date-time}
                lines:
                  type: array
                  items:
                    type: object
                    properties:
                      "a/b~c": {type: string, enum: [x, y]}
      responses: {default: {description: ""}}
  /files/{name}.json:
    put:
      operationId: putFile
      parameters:
        - {name: name, in: path, required: true, schema: {type: string, maxLength: 1}}
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              required: [title]
              properties:
                title: {type: string, minLength: 2}
      responses: {default: {description: ""}}
`

func TestCheck(t *testing.T) {
	v, err := idemvalidate.New([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if v.Operation("listOrders") != nil {
		t.Fatal("a check for an operation the document does not have")
	}
	order := v.Operation("createOrder")
	file := v.Operation("putFile")
	const valid = `{"lines": [{"a/b~c": "x"}]}`
	for _, tt := range []struct {
		name   string
		check  func(*http.Request, []byte) *idem.Problem
		method string
		target string
		header string // X-Request-Id, or the Content-Type of a form
		body   string
		want   string // in the detail; "" for a request that passes
	}{
		{"valid", order, "POST", "/accounts/acct_1/orders/3?limit=5", "r1", valid, ""},
		{"valid under a prefix", order, "POST", "/api/v1/accounts/acct_1/orders/3", "r1", valid, ""},
		{"a path parameter's pattern", order, "POST", "/accounts/ACCT/orders/3", "r1", valid, `The path parameter "account" is invalid`},
		{"a path parameter's maximum", order, "POST", "/accounts/acct_1/orders/11", "r1", valid, `The path parameter "n" is invalid: number must be at most 10`},
		{"a query parameter", order, "POST", "/accounts/acct_1/orders/3?limit=101", "r1", valid, `The query parameter "limit" is invalid: number must be at most 100`},
		{"a required header", order, "POST", "/accounts/acct_1/orders/3", "", valid, `The header parameter "X-Request-Id" is invalid: value is required but missing`},
		{"a header's length", order, "POST", "/accounts/acct_1/orders/3", "r123456789", valid, `The header parameter "X-Request-Id" is invalid: maximum string length is 8`},
		{"a member deep in the body, its pointer escaped", order, "POST", "/accounts/acct_1/orders/3", "r1", `{"lines": [{"a/b~c": "z"}]}`, "The request body is invalid at /lines/0/a~1b~0c: value is not one of the allowed values"},
		{"a format", order, "POST", "/accounts/acct_1/orders/3", "r1", `{"lines": [], "at": "yesterday"}`, "The request body is invalid at /at: string doesn't match the format \"date-time\""},
		{"a required member", order, "POST", "/accounts/acct_1/orders/3", "r1", `{}`, `property "lines" is missing`},
		{"no body", order, "POST", "/accounts/acct_1/orders/3", "r1", "", "The request body is invalid: value is required but missing"},
		{"not JSON", order, "POST", "/accounts/acct_1/orders/3", "r1", `{"lines":`, "The request body is invalid"},
		{"a form", file, "PUT", "/files/a.json", "application/x-www-form-urlencoded", "title=ok", ""},
		// A parameter within a segment is left to the router's binder.
		{"a parameter within a segment", file, "PUT", "/files/long.json", "application/x-www-form-urlencoded", "title=ok", ""},
		{"a form's member", file, "PUT", "/files/a.json", "application/x-www-form-urlencoded", "title=x", "/title: minimum string length is 2"},
		{"an empty form is a form without fields", file, "PUT", "/files/a.json", "", "", `property "title" is missing`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, strings.NewReader(tt.body))
			switch {
			case tt.check == nil:
				t.Fatal("no check")
			case strings.Contains(tt.header, "/"):
				r.Header.Set("Content-Type", tt.header)
			default:
				r.Header.Set("Content-Type", "application/json")
				if tt.header != "" {
					r.Header.Set("X-Request-Id", tt.header)
				}
			}
			if tt.name == "an empty form is a form without fields" {
				r.Header.Del("Content-Type")
			}
			p := tt.check(r, []byte(tt.body))
			switch {
			case tt.want == "" && p != nil:
				t.Fatalf("refused: %+v", p)
			case tt.want == "":
			case p == nil:
				t.Fatalf("passed, want a problem naming %q", tt.want)
			case p.Status != 400 || p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, tt.want):
				t.Fatalf("%+v, want 400 %s naming %q", p, idem.TypeInvalidRequest, tt.want)
			}
		})
	}
}

// A check reads neither the request's body nor changes its query or
// headers: defaults are not written in, and the body the gate holds is
// what the handler decodes.
func TestCheckChangesNothing(t *testing.T) {
	v, err := idemvalidate.New([]byte(strings.Replace(doc, "{name: limit, in: query, schema: {type: integer, maximum: 100}}", "{name: limit, in: query, schema: {type: integer, maximum: 100, default: 7}}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"lines": []}`
	r := httptest.NewRequest("POST", "/accounts/acct_1/orders/3", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Request-Id", "r1")
	if p := v.Operation("createOrder")(r, []byte(body)); p != nil {
		t.Fatal(p)
	}
	if r.URL.RawQuery != "" {
		t.Errorf("the query became %q", r.URL.RawQuery)
	}
	rest := new(strings.Builder)
	if _, err := io.Copy(rest, r.Body); err != nil || rest.String() != body {
		t.Errorf("the body left to read is %q (%v), want all of it", rest, err)
	}
}
