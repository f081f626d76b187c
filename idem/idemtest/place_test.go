package idemtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

func header(name string) KeyPart {
	return KeyPart{Source: idem.KeySource{In: idem.KeyInHeader, Name: name}}
}

func query(name string) KeyPart {
	return KeyPart{Source: idem.KeySource{In: idem.KeyInQuery, Name: name}}
}

func member(pointer string) KeyPart {
	return KeyPart{Source: idem.KeySource{In: idem.KeyInBody, Name: pointer}}
}

func integer(p KeyPart) KeyPart { p.Integer = true; return p }

var (
	jsonHeader = http.Header{"Content-Type": {"application/json"}}
	formHeader = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
)

// placed is the request the checks send for req with key and body.
func placed(t *testing.T, req Request, key keyValues, body []byte) (*http.Request, string) {
	t.Helper()
	c := &client{url: "http://api.test", req: req}
	r, sent, err := c.request(t.Context(), key, body)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(sent) {
		t.Fatalf("request returned the body %s, and sends %s", sent, b)
	}
	return r, string(b)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	mx, _ := json.Marshal(x)
	my, _ := json.Marshal(y)
	return string(mx) == string(my)
}

// Each placement puts the key's values where the operation reads them,
// and nowhere else: the header set once, whatever its spelling in the
// request; the query parameter among the path's others; the JSON member
// replaced or added, an integer as a number; the form field replaced.
func TestPlaceKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    Request
		key    keyValues
		check  func(r *http.Request) string // what is wrong, or ""
		body   string                       // the body wanted, "" for the request's own
		isJSON bool
	}{
		{"Idempotency-Key", Request{Header: jsonHeader.Clone(), Body: []byte(`{"a":1}`)}, keyValues{"k1"}, func(r *http.Request) string {
			return want(r.Header.Values(idem.HeaderKey), []string{"k1"})
		}, "", false},
		{"header", Request{Header: http.Header{"webhook-id": {"old"}}, Key: []KeyPart{header("Webhook-Id")}}, keyValues{"k1"}, func(r *http.Request) string {
			if len(r.Header) != 1 || r.Header.Get(idem.HeaderKey) != "" {
				return fmt.Sprintf("headers %v, want Webhook-Id alone", r.Header)
			}
			return want(r.Header.Values("Webhook-Id"), []string{"k1"})
		}, "", false},
		{"query", Request{Path: "/transfers?x=1&batch=old", Key: []KeyPart{query("batch")}}, keyValues{"b 1"}, func(r *http.Request) string {
			if r.URL.Path != "/transfers" || r.URL.Query().Get("x") != "1" {
				return "the path or its other parameter changed: " + r.URL.String()
			}
			return want(r.URL.Query()["batch"], []string{"b 1"})
		}, "", false},
		{"query, none before", Request{Path: "/transfers", Key: []KeyPart{query("batch")}}, keyValues{"b1"}, func(r *http.Request) string {
			return want([]string{r.URL.RequestURI()}, []string{"/transfers?batch=b1"})
		}, "", false},
		{"JSON member", Request{Header: jsonHeader, Body: []byte(`{"client_reference":"example","amount":5}`), Key: []KeyPart{member("/client_reference")}}, keyValues{"k1"},
			nil, `{"client_reference":"k1","amount":5}`, true},
		{"JSON member added", Request{Header: jsonHeader, Body: []byte(`{"text":"<a>"}`), Key: []KeyPart{member("/reference")}}, keyValues{"k1"},
			nil, `{"reference":"k1","text":"<a>"}`, true},
		{"JSON pointer, escaped and nested", Request{Header: jsonHeader, Body: []byte(`{"a/b":{"c~d":"x"},"n":1}`), Key: []KeyPart{member("/a~1b/c~0d")}}, keyValues{"k1"},
			nil, `{"a/b":{"c~d":"k1"},"n":1}`, true},
		{"JSON integer", Request{Header: jsonHeader, Body: []byte(`{"line":{"number":1},"amount":5}`), Key: []KeyPart{integer(member("/line/number"))}}, keyValues{"42"},
			nil, `{"line":{"number":42},"amount":5}`, true},
		{"JSON object added on the way", Request{Header: jsonHeader, Body: []byte(`{"amount":5}`), Key: []KeyPart{integer(member("/line/number"))}}, keyValues{"42"},
			nil, `{"line":{"number":42},"amount":5}`, true},
		{"form field", Request{Header: formHeader, Body: []byte(`po_number=PO-1&lines=3`), Key: []KeyPart{member("/po_number")}}, keyValues{"k 1&"},
			nil, `lines=3&po_number=k+1%26`, false},
		{"form field, media type parameters", Request{Header: http.Header{"Content-Type": {"Application/X-WWW-Form-Urlencoded; charset=utf-8"}}, Body: []byte(`lines=3`), Key: []KeyPart{member("/po_number")}}, keyValues{"k1"},
			nil, `lines=3&po_number=k1`, false},
		{"composite", Request{Path: "/transfers", Header: jsonHeader, Body: []byte(`{"line":{"number":1},"amount":5}`), Key: []KeyPart{query("batch"), integer(member("/line/number")), header("X-Shard")}}, keyValues{"b1", "7", "s1"}, func(r *http.Request) string {
			if r.URL.Query().Get("batch") != "b1" || r.Header.Get("X-Shard") != "s1" || r.Header.Get(idem.HeaderKey) != "" {
				return fmt.Sprintf("query %q, headers %v", r.URL.RawQuery, r.Header)
			}
			return ""
		}, `{"line":{"number":7},"amount":5}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Clone(string(tc.req.Body))
			r, body := placed(t, tc.req, tc.key, tc.req.Body)
			if tc.check != nil {
				if msg := tc.check(r); msg != "" {
					t.Fatal(msg)
				}
			}
			wantBody := tc.body
			if wantBody == "" {
				wantBody = string(tc.req.Body)
			}
			if tc.isJSON && !sameJSON(body, wantBody) || !tc.isJSON && body != wantBody {
				t.Fatalf("body %s, want %s", body, wantBody)
			}
			if string(tc.req.Body) != before {
				t.Fatalf("the request's own body changed to %s", tc.req.Body)
			}
		})
	}
}

func want(got, want []string) string {
	if !slices.Equal(got, want) {
		return fmt.Sprintf("got %q, want %q", got, want)
	}
	return ""
}

// The key's values go into a Changed body as into Body, so that the
// changed request carries the same key.
func TestPlaceKeyInChanged(t *testing.T) {
	req := Request{Header: jsonHeader, Body: []byte(`{"ref":"x","n":1}`), Changed: []byte(`{"n":2}`), Key: []KeyPart{member("/ref")}}
	changed, err := req.changed()
	if err != nil {
		t.Fatal(err)
	}
	if _, body := placed(t, req, keyValues{"k1"}, changed); !sameJSON(body, `{"ref":"k1","n":2}`) {
		t.Fatalf("the changed body sent is %s", body)
	}
}

// A placement that cannot be made says what to set.
func TestPlaceKeyRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"no body", Request{Header: jsonHeader, Key: []KeyPart{member("/ref")}}, "the request has no body; set Request.Body"},
		{"not JSON", Request{Header: jsonHeader, Body: []byte(`ref=1`), Key: []KeyPart{member("/ref")}}, "the body is not JSON"},
		{"not an object", Request{Header: jsonHeader, Body: []byte(`{"line":[1]}`), Key: []KeyPart{member("/line/number")}}, `"/line" is not an object in the body`},
		{"nested form field", Request{Header: formHeader, Body: []byte(`a=1`), Key: []KeyPart{member("/line/number")}}, "whose fields are not nested"},
		{"not a pointer", Request{Header: jsonHeader, Body: []byte(`{}`), Key: []KeyPart{member("ref")}}, "is not a JSON pointer"},
		{"unknown place", Request{Key: []KeyPart{{Source: idem.KeySource{In: "cookie", Name: "k"}}}}, `is in "cookie"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &client{url: "http://api.test", req: tc.req}
			_, _, err := c.request(t.Context(), tc.req.newKey(), tc.req.Body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("request: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Each key is fresh, one value per part, of the part's kind: text, a
// positive integer, a UUID.
func TestNewKeyValues(t *testing.T) {
	req := Request{Key: []KeyPart{header("X-Id"), integer(query("n")), {Source: idem.KeySource{In: idem.KeyInBody, Name: "/ref"}, UUID: true}}}
	seen := map[string]bool{}
	for range 50 {
		key := req.newKey()
		if len(key) != 3 {
			t.Fatalf("%d values for 3 parts", len(key))
		}
		if !strings.HasPrefix(key[0], "idemtest-") {
			t.Errorf("text part %q", key[0])
		}
		if n, err := strconv.ParseInt(key[1], 10, 32); err != nil || n <= 0 {
			t.Errorf("integer part %q is not a positive int32", key[1])
		}
		if !uuidPattern.MatchString(key[2]) {
			t.Errorf("UUID part %q is not a version 4 UUID", key[2])
		}
		for _, v := range key {
			if seen[v] {
				t.Errorf("value %q again", v)
			}
			seen[v] = true
		}
	}
	if key := (Request{}).newKey(); len(key) != 1 || !strings.HasPrefix(key[0], "idemtest-") {
		t.Fatalf("an Idempotency-Key: %q", key)
	}
}

// The changed request differs from the request in a value that is not
// the key's: changing the key's would make a new key, not a reuse.
func TestChangedLeavesKeyAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"JSON, the key the first string", Request{Header: jsonHeader, Body: []byte(`{"client_reference":"r1","note":"a"}`), Key: []KeyPart{member("/client_reference")}},
			`{"client_reference":"r1","note":"b"}`},
		{"JSON, the key the only number", Request{Header: jsonHeader, Body: []byte(`{"line":{"number":1},"note":"a"}`), Key: []KeyPart{integer(member("/line/number"))}},
			`{"line":{"number":1},"note":"b"}`},
		{"JSON, the key in a query", Request{Header: jsonHeader, Body: []byte(`{"amount":5}`), Key: []KeyPart{query("batch")}},
			`{"amount":6}`},
		{"form, the key the first field", Request{Header: formHeader, Body: []byte(`a_po=PO-1&note=x`), Key: []KeyPart{member("/a_po")}},
			`a_po=PO-1&note=y`},
		{"form, an integer", Request{Header: formHeader, Body: []byte(`po_number=PO-1&lines=3`), Key: []KeyPart{member("/po_number")}},
			`lines=4&po_number=PO-1`},
		{"form, a boolean", Request{Header: formHeader, Body: []byte(`po=PO-1&urgent=false`), Key: []KeyPart{member("/po")}},
			`po=PO-1&urgent=true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.changed()
			if err != nil {
				t.Fatal(err)
			}
			if tc.req.isForm() && string(got) != tc.want || !tc.req.isForm() && !sameJSON(string(got), tc.want) {
				t.Fatalf("changed %s to %s, want %s", tc.req.Body, got, tc.want)
			}
		})
	}
	for _, req := range []Request{
		{Header: jsonHeader, Body: []byte(`{"client_reference":"r1"}`), Key: []KeyPart{member("/client_reference")}},
		{Header: formHeader, Body: []byte(`po_number=PO-1&empty=`), Key: []KeyPart{member("/po_number")}},
	} {
		if got, err := req.changed(); err == nil || !strings.Contains(err.Error(), "but the key's own") {
			t.Errorf("changed(%s) = %s, %v; want an error: only the key could change", req.Body, got, err)
		}
	}
}

// keyReader reads a fake API's key from the request, as the generated
// handlers do from the places of the operation's annotation; "" when it
// has no part.
type keyReader func(r *http.Request, body []byte) string

func readHeader(name string) keyReader {
	return func(r *http.Request, _ []byte) string { return r.Header.Get(name) }
}

func readQuery(name string) keyReader {
	return func(r *http.Request, _ []byte) string { return r.URL.Query().Get(name) }
}

func readForm(name string) keyReader {
	return func(_ *http.Request, body []byte) string {
		v, _ := url.ParseQuery(string(body))
		return v.Get(name)
	}
}

// readJSON reads the member at tokens, a string or an integer.
func readJSON(tokens ...string) keyReader {
	return func(_ *http.Request, body []byte) string {
		var v any
		if json.Unmarshal(body, &v) != nil {
			return ""
		}
		for _, tok := range tokens {
			obj, _ := v.(map[string]any)
			v = obj[tok]
		}
		switch v := v.(type) {
		case string:
			return v
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
}

// readAll is a composite key: its parts as a JSON array.
func readAll(parts ...keyReader) keyReader {
	return func(r *http.Request, body []byte) string {
		var values []string
		for _, p := range parts {
			v := p(r, body)
			if v == "" {
				return ""
			}
			values = append(values, v)
		}
		b, _ := json.Marshal(values)
		return string(b)
	}
}

// Check passes an API keyed by each placement, and fails the one that
// does not tell a changed request apart, and a request whose placement
// is not the API's, where each check says.
func TestCheckPlacements(t *testing.T) {
	for _, tc := range []struct {
		name    string
		api     *fakeAPI
		req     Request
		failure []string // what the one failure wanted says, nil for none
	}{
		{"header", &fakeAPI{keyOf: readHeader("Webhook-Id")},
			Request{Method: "POST", Path: "/webhooks", Header: jsonHeader, Body: []byte(`{"type":"paid"}`), Key: []KeyPart{header("Webhook-Id")}}, nil},
		{"query", &fakeAPI{keyOf: readQuery("delivery")},
			Request{Method: "POST", Path: "/events?source=psp", Header: jsonHeader, Body: []byte(`{"n":1}`), Key: []KeyPart{query("delivery")}}, nil},
		{"JSON member, the first string", &fakeAPI{keyOf: readJSON("client_reference")},
			Request{Method: "POST", Path: "/orders", Header: jsonHeader, Body: []byte(`{"client_reference":"example","note":"a"}`), Key: []KeyPart{member("/client_reference")}}, nil},
		{"form field", &fakeAPI{keyOf: readForm("po_number")},
			Request{Method: "POST", Path: "/imports", Header: formHeader, Body: []byte(`lines=3`), Key: []KeyPart{member("/po_number")}}, nil},
		{"composite, an integer", &fakeAPI{keyOf: readAll(readQuery("batch"), readJSON("line", "number"))},
			Request{Method: "POST", Path: "/transfers", Header: jsonHeader, Body: []byte(`{"line":{"number":1},"amount":5}`), Key: []KeyPart{query("batch"), integer(member("/line/number"))}}, nil},
		{"changed body replayed", &fakeAPI{keyOf: readJSON("client_reference"), ignoreBody: true},
			Request{Method: "POST", Path: "/orders", Header: jsonHeader, Body: []byte(`{"client_reference":"example","note":"a"}`), Key: []KeyPart{member("/client_reference")}},
			// The body sent: the key placed, the note changed.
			[]string{`/changed-request: the key with another request ({"client_reference":"idemtest-`, `","note":"b"}): answered 201`}},
		{"the key elsewhere", &fakeAPI{keyOf: readHeader("Webhook-Id")},
			Request{Method: "POST", Path: "/webhooks", Header: jsonHeader, Body: []byte(`{"type":"paid"}`), Key: []KeyPart{query("delivery")}},
			[]string{"/first: first call (the delivery query parameter idemtest-", "answered 400", "is the request valid?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := NewRecorder(t)
			Check(ft, tc.api, tc.req, tc.api.hooks())
			failures := ft.Failures()
			if tc.failure == nil {
				if len(failures) > 0 {
					t.Fatalf("Check failed: %q", failures)
				}
				// first 1, concurrent 1, the failure and its retry 2.
				if got := tc.api.runs.Load(); got != 4 {
					t.Fatalf("the operation ran %d times, want 4", got)
				}
				return
			}
			if len(failures) != 1 || !containsAll(failures[0], tc.failure) {
				t.Fatalf("Check reported %q, want one failure saying %q", failures, tc.failure)
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
