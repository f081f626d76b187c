package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

func TestCanonical(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"key order", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"nested key order", `{"z":{"y":1,"x":[{"d":1,"c":2}]}}`, `{"z":{"x":[{"c":2,"d":1}],"y":1}}`},
		{"whitespace", " {\n\t\"a\" : [ 1 , 2 ] } ", `{"a":[1,2]}`},
		{"integer spellings", `[1, 1.0, 1e0, 10E-1, 100e-2, -0, 0.0, -0.0]`, `[1,1,1,1,1,0,0,0]`},
		{"fractions", `[0.5, 5e-1, 1.50]`, `[0.5,0.5,1.5]`},
		{"large integers stay exact", `[12345678901234567890, 12345678901234567891]`, `[12345678901234567890,12345678901234567891]`},
		{"exponent form", `[1e21, 1e-7, 123e30]`, `[1e+21,1e-7,1.23e+32]`},
		{"out of range kept", `[1e400]`, `[1e400]`},
		{"string escapes", `["\u0041\/"]`, `["A/"]`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := idem.Canonical([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"a":1} {}`, `[1,]`} {
		if _, err := idem.Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) accepted invalid JSON", bad)
		}
	}
}

type order struct {
	Amount   int             `json:"amount_cents"`
	Currency string          `json:"currency"`
	Meta     map[string]any  `json:"metadata,omitempty"`
	Union    json.RawMessage `json:"union,omitempty"`
}

func decode(t *testing.T, s string) order {
	t.Helper()
	var o order
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func fp(t *testing.T, op string, path, query idem.Params, body any, exclude ...string) []byte {
	t.Helper()
	sum, err := idem.Fingerprint(op, path, query, nil, body, exclude)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 32 {
		t.Fatalf("fingerprint has %d bytes, want 32", len(sum))
	}
	return sum
}

func TestFingerprint(t *testing.T) {
	base := fp(t, "createOrder", nil, nil, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":2.0}}`))
	same := []string{
		`{"currency":"EUR","amount_cents":100,"metadata":{"b":2,"a":1}}`,
		"{ \"amount_cents\" : 100 ,\n \"currency\":\"EUR\", \"metadata\":{\"a\":1e0,\"b\":20e-1}}",
	}
	for _, s := range same {
		if got := fp(t, "createOrder", nil, nil, decode(t, s)); !bytes.Equal(got, base) {
			t.Errorf("%s: fingerprint differs from the same request spelled differently", s)
		}
	}
	differ := map[string][]byte{
		"amount":    fp(t, "createOrder", nil, nil, decode(t, `{"amount_cents":101,"currency":"EUR","metadata":{"a":1,"b":2}}`)),
		"metadata":  fp(t, "createOrder", nil, nil, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":3}}`)),
		"operation": fp(t, "createRefund", nil, nil, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":2}}`)),
		"path":      fp(t, "createOrder", idem.Params{"id": "x"}, nil, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":2}}`)),
		"query":     fp(t, "createOrder", nil, idem.Params{"dry_run": true}, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":2}}`)),
	}
	if h, err := idem.Fingerprint("createOrder", nil, nil, idem.Params{"X-Tenant-Id": "t1"}, decode(t, `{"amount_cents":100,"currency":"EUR","metadata":{"a":1,"b":2}}`), nil); err != nil {
		t.Fatal(err)
	} else {
		differ["header"] = h
	}
	for name, got := range differ {
		if bytes.Equal(got, base) {
			t.Errorf("a different %s gives the same fingerprint", name)
		}
	}
	// Raw JSON inside a typed body (oneOf unions) is canonicalised too.
	u1 := fp(t, "op", nil, nil, decode(t, `{"union":{"x":1,"y":[1.0]}}`))
	u2 := fp(t, "op", nil, nil, decode(t, `{"union": { "y":[1], "x":1 }}`))
	if !bytes.Equal(u1, u2) {
		t.Error("raw JSON members are not canonicalised")
	}
	// Excluded pointers do not count; others still do.
	e1 := fp(t, "op", nil, nil, decode(t, `{"amount_cents":1,"metadata":{"trace":"a","keep":1}}`), "/metadata/trace")
	e2 := fp(t, "op", nil, nil, decode(t, `{"amount_cents":1,"metadata":{"trace":"b","keep":1}}`), "/metadata/trace")
	e3 := fp(t, "op", nil, nil, decode(t, `{"amount_cents":1,"metadata":{"trace":"b","keep":2}}`), "/metadata/trace")
	if !bytes.Equal(e1, e2) {
		t.Error("an excluded member changed the fingerprint")
	}
	if bytes.Equal(e2, e3) {
		t.Error("exclusion removed more than its pointer")
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.0,2e3,"x"]}`, `[]`, `null`, `"\u00e9"`, `1e400`, `-0.0`, `{"a":{"b":{"c":{}}}}`, strings.Repeat("[", 50) + strings.Repeat("]", 50), `12345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, err := idem.Canonical(data)
		if err != nil {
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("canonical form %q of %q is not valid JSON", c1, data)
		}
		c2, err := idem.Canonical(c1)
		if err != nil {
			t.Fatalf("canonical form %q does not re-parse: %v", c1, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent: %q -> %q -> %q", data, c1, c2)
		}
	})
}

// Form is the form the binder bound a typed body from: the body's fields
// and the query's, as http.Request.ParseForm merges them; nil when the
// request's body was not the form (no typed form body) or the form is
// empty.
func TestForm(t *testing.T) {
	r := httptest.NewRequest("POST", "/customers?name=Alice&source=web", strings.NewReader("email=a%40example.com&name=Bob"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if err := r.ParseForm(); err != nil {
		t.Fatal(err)
	}
	ctx := idem.WithRequest(context.Background(), r)
	type body struct{ Name string }
	want := url.Values{"email": {"a@example.com"}, "name": {"Bob", "Alice"}, "source": {"web"}}
	if got := idem.Form(ctx, &body{}); !reflect.DeepEqual(got, want) {
		t.Errorf("Form: %v, want %v", got, want)
	}
	if got := idem.Form[body](ctx, nil); got != nil {
		t.Errorf("Form without a typed body: %v, want nil", got)
	}
	empty := httptest.NewRequest("POST", "/customers", http.NoBody)
	empty.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if err := empty.ParseForm(); err != nil {
		t.Fatal(err)
	}
	if got := idem.Form(idem.WithRequest(context.Background(), empty), &body{}); got != nil {
		t.Errorf("Form of an empty form: %v, want nil", got)
	}
	if got := idem.Form(context.Background(), &body{}); got != nil {
		t.Errorf("Form without a request: %v, want nil", got)
	}
}
