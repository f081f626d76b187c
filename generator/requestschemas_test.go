package generator_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/idem/idemvalidate"
)

// checkRequestSchemas checks the request schemas Generate wrote for res:
// they load, and each checked operation's check answers a request with
// nothing in it, an empty JSON object and a form without a panic, with a
// 400 that says why or nil. A document that failed to load would panic
// every handler at start. The real specs' tests call it with every
// operation that takes a body annotated (Stripe's every POST).
func checkRequestSchemas(t *testing.T, res *generator.Result) {
	t.Helper()
	doc, ops := generator.RequestSchemas(res)
	if len(ops) == 0 {
		t.Fatal("no operation is checked")
	}
	v, err := idemvalidate.New(doc)
	if err != nil {
		t.Fatalf("the request schemas do not load: %v", err)
	}
	param := regexp.MustCompile(`\{[^}]*\}`)
	for name, route := range ops {
		check := v.Operation(name)
		if check == nil {
			t.Errorf("%s: no check", name)
			continue
		}
		path := param.ReplaceAllString(route[1], "x")
		for _, body := range []struct{ ct, text string }{{"", ""}, {"application/json", "{}"}, {"application/x-www-form-urlencoded", "a=1"}} {
			r := httptest.NewRequest(route[0], path, strings.NewReader(body.text))
			if body.ct != "" {
				r.Header.Set("Content-Type", body.ct)
			}
			if p := check(r, []byte(body.text)); p != nil && (p.Status != http.StatusBadRequest || p.Detail == "") {
				t.Errorf("%s with %q: %+v, want nil or a 400 that says why", name, body.text, p)
			}
		}
	}
	t.Logf("%d operations checked, from a %d-byte document", len(ops), len(doc))
}
