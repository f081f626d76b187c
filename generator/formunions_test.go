package generator_test

import (
	"path/filepath"
	"testing"
)

// TestFormUnions runs the formunions test spec's generated handler over
// HTTP. Its form body's fields whose schema is a union (Stripe's "object
// or empty string" metadata and address, an integer or an enum, an array
// or the empty string, nested in an object and in array items) are left
// unset by oapi-codegen's form binder; the handler must receive them
// bound, and a value no alternative takes is a 400 naming the field,
// before any claim. The fingerprint covers the form as sent, the same in
// any order of its fields.
func TestFormUnions(t *testing.T) {
	t.Parallel()
	spec, err := filepath.Abs(filepath.Join("testdata", "formunions", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := generate(t, configFor(t, t.TempDir(), spec, ""))
	goTest(t, writeGoPackage(t, res, map[string]string{"formunions_run_test.go": formUnionsTest}))
}

const formUnionsTest = `package gen

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type service struct{ runs int }

// PostCustomers answers with the body it received, as JSON: a union's
// MarshalJSON writes the union as bound.
func (s *service) PostCustomers(ctx context.Context, at *idem.Attempt[memstore.NoTx], request PostCustomersRequestObject) (PostCustomersResponseObject, error) {
	s.runs++
	data, err := json.Marshal(request.Body)
	if err != nil {
		return nil, err
	}
	var echo map[string]any
	if err := json.Unmarshal(data, &echo); err != nil {
		return nil, err
	}
	return PostCustomers200JSONResponse(echo), nil
}

func TestFormUnions(t *testing.T) {
	svc := &service{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(key, form string) (int, string, map[string]any) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/v1/customers", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatalf("%d %s: %v", resp.StatusCode, data, err)
		}
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed), body
	}
	want := func(body map[string]any, field string, value any) {
		t.Helper()
		if got := body[field]; !reflect.DeepEqual(got, value) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(value)
			t.Errorf("%s reached the handler as %s, want %s", field, g, w)
		}
	}

	form := "name=Jo&expand%5B%5D=a&expand%5B%5D=b&metadata%5Border%5D=42&metadata%5Bsrc%5D=web" +
		"&address%5Bline1%5D=1+Main+St&address%5Bcity%5D=Paris&delay_days=3&tax_ids%5B%5D=t1&tax_ids%5B%5D=t2" +
		"&shipping%5Bname%5D=Jo&shipping%5Baddress%5D%5Bcity%5D=Lyon&items%5B0%5D%5Bprice%5D=p1&items%5B0%5D%5Bmetadata%5D%5Bk%5D=v"
	status, _, body := send("k1", form)
	if status != 200 {
		t.Fatalf("first request: %d %v", status, body)
	}
	want(body, "name", "Jo")
	want(body, "expand", []any{"a", "b"})
	want(body, "metadata", map[string]any{"order": "42", "src": "web"})
	want(body, "address", map[string]any{"line1": "1 Main St", "city": "Paris"})
	want(body, "delay_days", 3.0)
	want(body, "tax_ids", []any{"t1", "t2"})
	want(body, "shipping", map[string]any{"name": "Jo", "address": map[string]any{"city": "Lyon"}})
	want(body, "items", []any{map[string]any{"price": "p1", "metadata": map[string]any{"k": "v"}}})

	// The same fields in another order: the same request.
	reordered := "items%5B0%5D%5Bmetadata%5D%5Bk%5D=v&metadata%5Bsrc%5D=web&tax_ids%5B%5D=t1&expand%5B%5D=a&delay_days=3" +
		"&address%5Bcity%5D=Paris&shipping%5Baddress%5D%5Bcity%5D=Lyon&metadata%5Border%5D=42&name=Jo&tax_ids%5B%5D=t2" +
		"&address%5Bline1%5D=1+Main+St&expand%5B%5D=b&shipping%5Bname%5D=Jo&items%5B0%5D%5Bprice%5D=p1"
	status, replayed, again := send("k1", reordered)
	if status != 200 || replayed != "true" || !reflect.DeepEqual(again, body) {
		t.Fatalf("the same fields in another order: %d replayed=%q %v, want the replay of %v", status, replayed, again, body)
	}
	if status, _, body := send("k1", strings.Replace(form, "metadata%5Bsrc%5D=web", "metadata%5Bsrc%5D=app", 1)); status != 422 {
		t.Fatalf("metadata[src] changed under the same key: %d %v, want 422", status, body)
	}
	if status, _, body := send("k1", strings.Replace(form, "expand%5B%5D=a&expand%5B%5D=b", "expand%5B%5D=b&expand%5B%5D=a", 1)); status != 422 {
		t.Fatalf("the items of expand[] in another order under the same key: %d %v, want 422", status, body)
	}

	// The other alternatives: the empty string that clears, an enum value.
	status, _, body = send("k2", "metadata=&address=&delay_days=minimum&tax_ids=&shipping%5Baddress%5D=")
	if status != 200 {
		t.Fatalf("cleared fields: %d %v", status, body)
	}
	want(body, "metadata", "")
	want(body, "address", "")
	want(body, "delay_days", "minimum")
	want(body, "tax_ids", "")
	want(body, "shipping", map[string]any{"address": ""})
	if svc.runs != 2 {
		t.Fatalf("the handler ran %d times, want 2", svc.runs)
	}

	// What no alternative takes is a 400 that names the field, before any
	// claim: the key stays free.
	for _, bad := range []struct{ form, field string }{
		{"delay_days=soon", "delay_days"},
		{"metadata=x", "metadata"},
		{"address%5Bline1%5D=x&address=", "address"},
		{"shipping%5Baddress%5D=gone", "shipping[address]"},
	} {
		status, _, body := send("k3", bad.form)
		detail, _ := body["detail"].(string)
		if status != 400 || !strings.Contains(detail, "form field "+bad.field+" ") {
			t.Errorf("%s: %d %v, want a 400 naming %s", bad.form, status, body, bad.field)
		}
	}
	if status, _, body := send("k3", "delay_days=7"); status != 200 {
		t.Fatalf("the key of refused requests: %d %v, want it free", status, body)
	}
	if svc.runs != 3 {
		t.Fatalf("the handler ran %d times, want 3", svc.runs)
	}
}
`
