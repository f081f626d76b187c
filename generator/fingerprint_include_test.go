package generator_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator"
)

// includeSpec has a webhook receiver whose body carries a delivery time
// that changes on each redelivery, and an operation with a JSON and a
// form body: fingerprint.include lists what alone counts in each.
const includeSpec = `openapi: 3.0.3
info:
  title: webhooks
  version: "1"
paths:
  /webhooks:
    post:
      operationId: receiveEvent
      x-idempotent:
        scope: none
        fingerprint:
          include: [/id, /data, x-account-id]
      parameters:
        - {name: X-Account-Id, in: header, schema: {type: string}}
        - {name: X-Trace-Id, in: header, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Event"
      responses:
        "204":
          description: received
  /refunds:
    post:
      operationId: createRefund
      x-idempotent:
        fingerprint:
          include: [/amount, /metadata/order_id]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Refund"
          application/x-www-form-urlencoded:
            schema:
              $ref: "#/components/schemas/Refund"
      responses:
        "204":
          description: created
components:
  schemas:
    Event:
      type: object
      required: [id, type, data, delivered_at]
      properties:
        id: {type: string}
        type: {type: string}
        delivered_at: {type: string, format: date-time}
        data:
          type: object
          properties:
            amount: {type: integer}
            note: {type: string}
    Refund:
      type: object
      required: [amount]
      properties:
        amount: {type: integer}
        reason: {type: string}
        metadata:
          type: object
          additionalProperties: {type: string}
`

// includeTest runs in the generated package: it calls the fingerprint
// writers directly, and checks what they write against idem.Fingerprint
// of the request with only the included members.
const includeTest = `package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/randvalue"
)

// sum is a writer's fingerprint; the requests below all encode.
func sum(fp []byte, err error) string {
	if err != nil {
		panic(err)
	}
	return string(fp)
}

func event(t *testing.T, s string) *Event {
	t.Helper()
	var e Event
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

func str(s string) *string { return &s }

func TestIncludeJSONAndHeaders(t *testing.T) {
	ctx := context.Background()
	fp := func(account, trace, body string) string {
		t.Helper()
		req := ReceiveEventRequestObject{Params: ReceiveEventParams{XAccountId: str(account), XTraceId: str(trace)}, Body: event(t, body)}
		return sum(receiveEventFingerprint(ctx, req))
	}
	const first = ` + "`" + `{"id": "evt_1", "type": "charge.succeeded", "delivered_at": "2024-05-01T10:00:00Z", "data": {"amount": 5, "note": "n"}}` + "`" + `
	base := fp("a1", "t1", first)
	for _, c := range []struct {
		name, account, trace, body string
		same                       bool
	}{
		{"redelivered later", "a1", "t1", ` + "`" + `{"id": "evt_1", "type": "charge.succeeded", "delivered_at": "2024-05-01T10:05:00Z", "data": {"amount": 5, "note": "n"}}` + "`" + `, true},
		{"another type, not included", "a1", "t1", ` + "`" + `{"id": "evt_1", "type": "charge.updated", "delivered_at": "2024-05-01T10:00:00Z", "data": {"amount": 5, "note": "n"}}` + "`" + `, true},
		{"another trace id, a header not included", "a1", "t2", first, true},
		{"another /data", "a1", "t1", ` + "`" + `{"id": "evt_1", "type": "charge.succeeded", "delivered_at": "2024-05-01T10:00:00Z", "data": {"amount": 6, "note": "n"}}` + "`" + `, false},
		{"a member of /data left out", "a1", "t1", ` + "`" + `{"id": "evt_1", "type": "charge.succeeded", "delivered_at": "2024-05-01T10:00:00Z", "data": {"amount": 5}}` + "`" + `, false},
		{"another /id", "a1", "t1", ` + "`" + `{"id": "evt_2", "type": "charge.succeeded", "delivered_at": "2024-05-01T10:00:00Z", "data": {"amount": 5, "note": "n"}}` + "`" + `, false},
		{"another account, an included header", "a2", "t1", first, false},
	} {
		if got := fp(c.account, c.trace, c.body); (got == base) != c.same {
			t.Errorf("%s: same fingerprint %v, want %v", c.name, got == base, c.same)
		}
	}
	// The canonical form is the request's with only what include lists.
	want, err := idem.Fingerprint("receiveEvent", nil, nil, idem.Params{"X-Account-Id": "a1"},
		map[string]any{"id": "evt_1", "data": map[string]any{"amount": 5, "note": "n"}}, nil)
	if err != nil || !bytes.Equal(want, []byte(base)) {
		t.Errorf("writer %x, idem.Fingerprint of the included members %x (error %v)", base, want, err)
	}
}

// kept is v as encoding/json writes it with only the members at paths,
// token lists; ok is false when v does not encode.
func kept(v any, paths ...[]string) (any, bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var d any
	if err := dec.Decode(&d); err != nil {
		return nil, false
	}
	return pick(d, paths), true
}

func pick(v any, paths [][]string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	sub := map[string][][]string{}
	for _, p := range paths {
		if len(p) == 0 {
			return v
		}
		sub[p[0]] = append(sub[p[0]], p[1:])
	}
	out := map[string]any{}
	for k, ps := range sub {
		if c, ok := m[k]; ok {
			out[k] = pick(c, ps)
		}
	}
	return out
}

// Random requests: each writer gives idem.Fingerprint of the request with
// only the members include lists, byte for byte.
func TestIncludeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	same := func(what string, got []byte, gotErr error, want []byte, wantErr error) {
		t.Helper()
		if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s: writer %x (error %v), reference %x (error %v)", what, got, gotErr, want, wantErr)
		}
	}
	compared := 0
	for range 2000 {
		var event ReceiveEventRequestObject
		randvalue.Fill(r, &event)
		var body any = event.Body
		if event.Body != nil {
			var ok bool
			if body, ok = kept(event.Body, []string{"id"}, []string{"data"}); !ok {
				continue // a member not included does not encode
			}
		}
		got, gotErr := receiveEventFingerprint(ctx, event)
		want, wantErr := idem.Fingerprint("receiveEvent", nil, nil, idem.Params{"X-Account-Id": event.Params.XAccountId}, body, nil)
		same("receiveEvent", got, gotErr, want, wantErr)

		var refund CreateRefundRequestObject
		randvalue.Fill(r, &refund)
		refund.FormdataBody = nil
		var jsonBody any = refund.JSONBody
		if refund.JSONBody != nil {
			var ok bool
			if jsonBody, ok = kept(refund.JSONBody, []string{"amount"}, []string{"metadata", "order_id"}); !ok {
				continue
			}
		}
		got, gotErr = createRefundFingerprint(ctx, refund)
		want, wantErr = idem.Fingerprint("createRefund", nil, nil, nil, idem.Params{"Formdata": nil, "JSON": jsonBody}, nil)
		same("createRefund", got, gotErr, want, wantErr)
		compared++
	}
	t.Logf("%d random requests compared", compared)
	if compared < 200 {
		t.Fatalf("only %d of 2000 random requests encode: too few to compare", compared)
	}
}

func TestIncludeJSONAndFormBodies(t *testing.T) {
	fromJSON := func(body string) string {
		t.Helper()
		var r Refund
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return sum(createRefundFingerprint(context.Background(), CreateRefundRequestObject{JSONBody: &r}))
	}
	fromForm := func(form url.Values) string {
		t.Helper()
		ctx := idem.WithRequest(context.Background(), &http.Request{Form: form, PostForm: form})
		return sum(createRefundFingerprint(ctx, CreateRefundRequestObject{FormdataBody: &Refund{}}))
	}
	base := fromJSON(` + "`" + `{"amount": 5, "reason": "dup", "metadata": {"order_id": "o1", "trace": "x"}}` + "`" + `)
	if fromJSON(` + "`" + `{"amount": 5, "reason": "other", "metadata": {"order_id": "o1", "trace": "y"}}` + "`" + `) != base {
		t.Error("JSON: another reason and metadata/trace, not included, changed the fingerprint")
	}
	for _, body := range []string{` + "`" + `{"amount": 6, "metadata": {"order_id": "o1"}}` + "`" + `, ` + "`" + `{"amount": 5, "metadata": {"order_id": "o2"}}` + "`" + `, ` + "`" + `{"amount": 5}` + "`" + `} {
		if fromJSON(body) == base {
			t.Errorf("JSON: %s, which differs in what is included, has the same fingerprint", body)
		}
	}
	want, err := idem.Fingerprint("createRefund", nil, nil, nil, idem.Params{"JSON": map[string]any{"amount": 5, "metadata": map[string]any{"order_id": "o1"}}, "Formdata": nil}, nil)
	if err != nil || !bytes.Equal(want, []byte(base)) {
		t.Errorf("JSON: writer %x, idem.Fingerprint of the included members %x (error %v)", base, want, err)
	}

	form := url.Values{"amount": {"5"}, "reason": {"dup"}, "metadata[order_id]": {"o1"}, "metadata[trace]": {"x"}}
	formBase := fromForm(form)
	if fromForm(url.Values{"amount": {"5"}, "reason": {"other"}, "metadata[order_id]": {"o1"}}) != formBase {
		t.Error("form: another reason and no metadata[trace], not included, changed the fingerprint")
	}
	for _, f := range []url.Values{{"amount": {"6"}, "metadata[order_id]": {"o1"}}, {"amount": {"5"}, "metadata[order_id]": {"o2"}}, {"amount": {"5"}}} {
		if fromForm(f) == formBase {
			t.Errorf("form: %v, which differs in what is included, has the same fingerprint", f)
		}
	}
	want, err = idem.Fingerprint("createRefund", nil, nil, nil, idem.Params{"Formdata": url.Values{"amount": {"5"}, "metadata[order_id]": {"o1"}}, "JSON": nil}, nil)
	if err != nil || !bytes.Equal(want, []byte(formBase)) {
		t.Errorf("form: writer %x, idem.Fingerprint of the included fields %x (error %v)", formBase, want, err)
	}
}
`

// TestFingerprintInclude generates includeSpec, compiles it with a test
// that calls its fingerprint writers, and runs it: what include lists
// counts, and nothing else does.
func TestFingerprintInclude(t *testing.T) {
	bin := buildTestBinary(t, "fingerprint-include", func(t *testing.T) string {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "openapi.yaml"), []byte(includeSpec))
		res := generate(t, configFor(t, dir, "openapi.yaml", ""))
		return writeGoPackage(t, res, map[string]string{"include_run_test.go": includeTest})
	})
	t.Run("JSON body and headers", func(t *testing.T) { runTestBinary(t, bin, "^TestIncludeJSONAndHeaders$", "") })
	t.Run("JSON and form bodies", func(t *testing.T) { runTestBinary(t, bin, "^TestIncludeJSONAndFormBodies$", "") })
	t.Run("random requests", func(t *testing.T) { runTestBinary(t, bin, "^TestIncludeMatchesReference$", "") })
}

// TestFingerprintIncludeContract records include in the contract: setting
// it, changing it and dropping it warn, while a change to a body member
// it does not list says nothing.
func TestFingerprintIncludeContract(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.yaml")
	cfg := configFor(t, dir, "openapi.yaml", "")
	src := contractSpec
	step := func(name string, want []string, edits ...string) {
		t.Helper()
		for i := 0; i < len(edits); i += 2 {
			if !strings.Contains(src, edits[i]) {
				t.Fatalf("%s: the spec has no %q", name, edits[i])
			}
			src = strings.Replace(src, edits[i], edits[i+1], 1)
		}
		writeFile(t, spec, []byte(src))
		res := generate(t, cfg)
		if _, err := res.Write(dir); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 && len(res.Warnings) != 0 || len(want) != 0 && len(res.Warnings) != 1 {
			t.Fatalf("%s: warnings\n%s\nwant %d", name, strings.Join(res.Warnings, "\n"), min(len(want), 1))
		}
		for _, s := range want {
			if !strings.Contains(res.Warnings[0], s) {
				t.Errorf("%s: the warning does not say %q:\n%s", name, s, res.Warnings[0])
			}
		}
		if written, reread, ok := generator.ContractRoundTrip(res); !ok || written != reread {
			t.Errorf("%s: the contract reads back as\n%s\nwant\n%s", name, reread, written)
		}
	}
	const every = "Its fingerprint changes: a request sent with an Idempotency-Key before this is deployed"
	step("first generation", nil)
	step("include set", []string{"fingerprint.include [/name, X-Account-Id] set: only what it lists counts", `header parameter "X-Tenant-Id" now left out (not in fingerprint.include)`, every},
		"        scope: {header: X-Account-Id}\n", "        scope: {header: X-Account-Id}\n        fingerprint: {include: [/name, X-Account-Id]}\n")
	step("regenerated unchanged", nil)
	step("a member not included added", nil,
		"        name:\n          type: string\n", "        name:\n          type: string\n        note:\n          type: string\n")
	step("a member included", []string{"fingerprint.include /metadata/trace_id added", `member "metadata" added`},
		"include: [/name, X-Account-Id]", "include: [/name, /metadata/trace_id, X-Account-Id]")
	step("a header included", []string{`header parameter "X-Tenant-Id" no longer left out (fingerprint.include)`, "fingerprint.include X-Tenant-Id added"},
		"include: [/name, /metadata/trace_id, X-Account-Id]", "include: [/name, /metadata/trace_id, X-Account-Id, X-Tenant-Id]")
	step("include dropped", []string{"fingerprint.include [/metadata/trace_id, /name, X-Account-Id, X-Tenant-Id] dropped: every parameter and body member counts", every},
		"        fingerprint: {include: [/name, /metadata/trace_id, X-Account-Id, X-Tenant-Id]}\n", "")
}

// TestFingerprintIncludeRefused: entries that name nothing the operation
// has, values of the wrong type and pointers the writers cannot pick fail
// Generate at the entry, with what was expected.
func TestFingerprintIncludeRefused(t *testing.T) {
	const thing = `      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "204":
          description: done
`
	const trace = "      parameters:\n        - {name: X-Trace-Id, in: header, schema: {type: string}}\n"
	tests := []struct {
		name, fingerprint, rest string
		line, col               int
		msg                     string
	}{
		{"unknown pointer", "include: [/metadata/trace]", thing, 10, 33,
			`x-idempotent on POST /things: fingerprint.include /metadata/trace: the request body schema has no "trace" under "/metadata"; expected one of source, trace_id`},
		{"undeclared parameter", "include: [/name, X-Trace]", trace + thing, 10, 40,
			`x-idempotent on POST /things: fingerprint.include X-Trace: the operation has no parameter "X-Trace"; expected one of X-Trace-Id, or a JSON pointer into the body starting with /`},
		{"not a list", "include: /name", thing, 10, 32,
			`x-idempotent.fingerprint.include: "/name" is a string; expected a list of JSON pointers into the body, such as [/metadata/trace_id], or parameter names`},
		{"an entry not a string", "include: [/name, {a: 1}]", thing, 10, 40,
			`x-idempotent.fingerprint.include[1]: the value is a mapping; expected a JSON pointer such as /metadata/trace_id`},
		{"an empty list", "include: []", thing, 10, 32,
			`x-idempotent.fingerprint.include: the list is empty, which would leave only the operation's name in the fingerprint; expected the JSON pointers into the body and the parameter names that count, such as [/id, /data], or no include`},
		{"with exclude", "include: [/name], exclude: [/metadata]", thing, 10, 41,
			`x-idempotent.fingerprint: exclude cannot be combined with include (line 10); expected include alone, listing only what counts (leave out of it what exclude would remove), or exclude alone`},
		{"no JSON body", "include: [/name]", strings.Replace(thing, "application/json", "application/x-www-form-urlencoded", 1), 10, 33,
			"x-idempotent on POST /things: fingerprint.include /name: the operation has no JSON request body to include from"},
		{"a text body beside the JSON one", "include: [/name]", strings.Replace(thing, "      responses:", "          text/plain:\n            schema: {type: string}\n      responses:", 1), 10, 33,
			"x-idempotent on POST /things: fingerprint.include /name: request body text/plain has no members for a JSON pointer to name, so none of it would count; expected fingerprint.exclude, which leaves such a body whole, or no text/plain body"},
		{"inside a union", "include: [/pick/kind]", thing, 10, 33,
			"x-idempotent on POST /things: fingerprint.include /pick/kind: /pick is written whole, as encoding/json encodes it (a union, a type with its own JSON methods, an array or a free-form value), so a pointer cannot pick members inside it; expected /pick"},
		{"inside an array", "include: [/tags/0]", thing, 10, 33,
			"x-idempotent on POST /things: fingerprint.include /tags/0: /tags is written whole, as encoding/json encodes it (a union, a type with its own JSON methods, an array or a free-form value), so a pointer cannot pick members inside it; expected /tags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := filepath.Join(dir, "openapi.yaml")
			op := "    post:\n      operationId: createThing\n      x-idempotent:\n        fingerprint: {" + tt.fingerprint + "}\n" + tt.rest
			writeFile(t, spec, []byte(header+op+includeComponents))
			_, err := generateFrom(configFor(t, dir, "openapi.yaml", ""))
			want := fmt.Sprintf("%s:%d:%d: %s", spec, tt.line, tt.col, tt.msg)
			if err == nil || err.Error() != want {
				t.Errorf("got error\n\t%v\nwant\n\t%s", err, want)
			}
		})
	}
}

// includeComponents are the schemas of the specs of
// TestFingerprintIncludeRefused, with a union and an array for the
// pointers that go inside them.
const includeComponents = `components:
  schemas:
    Thing:
      type: object
      properties:
        name: {type: string}
        metadata:
          type: object
          properties:
            trace_id: {type: string}
            source: {type: string}
        tags:
          type: array
          items: {type: string}
        pick:
          oneOf:
            - $ref: "#/components/schemas/Card"
            - $ref: "#/components/schemas/Bank"
    Card:
      type: object
      properties: {kind: {type: string}, number: {type: string}}
    Bank:
      type: object
      properties: {kind: {type: string}, iban: {type: string}}
`
