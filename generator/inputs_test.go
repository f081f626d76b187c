package generator_test

import (
	"strings"
	"testing"
)

// The tests here run the inputs test spec's generated handler over HTTP
// on every server kind: its annotated operations read every kind of
// input the binder reads (path, query and header parameters, a JSON body,
// a form body, a body of either kind), and the tests check that the
// fingerprint covers exactly what the handler receives.

// TestFingerprintFollowsBinder changes one input of a request at a time
// and checks that the typed request the handler receives and the
// fingerprint change together: both or neither. A fingerprint that does
// not change when the typed request does would replay another request's
// answer.
func TestFingerprintFollowsBinder(t *testing.T) {
	t.Parallel()
	runInputs(t, "^TestFingerprintFollowsBinder$")
}

// TestFormQueryInFingerprint: a form operation's typed body is bound from
// the form with the URL query merged in, so the query counts in the
// fingerprint: a query that changes the typed body under the same key is
// a 422, never the other request's replay.
func TestFormQueryInFingerprint(t *testing.T) {
	runInputs(t, "^TestFormQueryInFingerprint$")
}

// TestTrailingDataIs400: a JSON body with data after its value is a 400
// problem that says what to fix, before any claim, however it is sent.
func TestTrailingDataIs400(t *testing.T) {
	runInputs(t, "^TestTrailingDataIs400$")
}

// TestBodyNotUTF8Is400: a JSON body that is not UTF-8 is a 400 problem
// saying so, before any claim, on every server kind: encoding/json would
// read its bytes as U+FFFD, and two requests that differ there would
// fingerprint alike.
func TestBodyNotUTF8Is400(t *testing.T) {
	runInputs(t, "^TestBodyNotUTF8Is400$")
}

// TestUndeclaredMediaTypeIs415: a body of a media type the annotated
// operation does not declare, or of none, is a 415 problem naming those
// it does, before any claim.
func TestUndeclaredMediaTypeIs415(t *testing.T) {
	runInputs(t, "^TestUndeclaredMediaTypeIs415$")
}

// runInputs runs the inputs suite's tests matching run on every server
// kind.
func runInputs(t *testing.T, run string) {
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runTestBinary(t, kindBinary(t, kind), "^TestInputs_"+strings.TrimPrefix(run, "^Test"), "")
		})
	}
}

// inputsMounts hold each kind's newHandler, mounted at the root.
var inputsMounts = map[string]string{
	"std-http": inputsHTTPMount,
	"chi":      inputsHTTPMount,
	"echo": `package gen

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	e := echo.New()
	RegisterIdempotentHandlers(e, impl, store, opts)
	return e
}
`,
	"gin": `package gen

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	gin.SetMode(gin.ReleaseMode) // no debug route listing
	r := gin.New()
	RegisterIdempotentHandlers(r, impl, store, opts)
	return r
}
`,
}

const inputsHTTPMount = `package gen

import (
	"net/http"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	return NewIdempotentHandler(impl, store, opts)
}
`

const inputsSuite = `package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// service records the typed request of each run.
type service struct {
	mu   sync.Mutex
	runs int
	last any
	// asBefore is whether createCustomer's last fingerprint was the one
	// of the body's form alone.
	asBefore bool
}

func (s *service) record(request any) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.last = request
	return s.runs
}

func (s *service) lastRequest() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *service) runCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

func (s *service) CreateItem(_ context.Context, _ *idem.Attempt[memstore.NoTx], request CreateItemRequestObject) (CreateItemResponseObject, error) {
	return CreateItem201JSONResponse{Run: s.record(request)}, nil
}

func (s *service) CreateCustomer(ctx context.Context, _ *idem.Attempt[memstore.NoTx], request CreateCustomerRequestObject) (CreateCustomerResponseObject, error) {
	// What the fingerprint was before the query counted in it: the body's
	// form alone.
	got, err := createCustomerFingerprint(ctx, request)
	if err != nil {
		return nil, err
	}
	before, err := idem.Fingerprint("createCustomer", nil, idem.Params{"source": request.Params.Source}, nil, idem.RequestFrom(ctx).PostForm, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.asBefore = bytes.Equal(got, before)
	s.mu.Unlock()
	return CreateCustomer201JSONResponse{Run: s.record(request)}, nil
}

func (s *service) UpdateCustomer(_ context.Context, _ *idem.Attempt[memstore.NoTx], request UpdateCustomerRequestObject) (UpdateCustomerResponseObject, error) {
	return UpdateCustomer200JSONResponse{Run: s.record(request)}, nil
}

func (s *service) CreateNote(_ context.Context, request CreateNoteRequestObject) (CreateNoteResponseObject, error) {
	return CreateNote201JSONResponse{Run: s.record(request)}, nil
}

// request is an HTTP request to the test server.
type request struct {
	method, path string // the path with its query
	header       map[string]string
	body         string
	chunked      bool // sent of unknown length
}

func (r request) with(f func(*request)) request {
	r.header = copyHeader(r.header)
	f(&r)
	return r
}

func copyHeader(h map[string]string) map[string]string {
	c := make(map[string]string, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

type answer struct {
	status   int
	replayed bool
	problem  idem.Problem
	body     string
}

var keys atomic.Int64

func newKey() string { return fmt.Sprintf("k%d", keys.Add(1)) }

func newServer(t *testing.T, opts IdempotentHandlerOptions) (*service, *httptest.Server) {
	t.Helper()
	svc := &service{}
	opts.Logger = slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), opts))
	t.Cleanup(srv.Close)
	return svc, srv
}

func send(t *testing.T, srv *httptest.Server, r request, key string) answer {
	t.Helper()
	var body io.Reader = strings.NewReader(r.body)
	if r.chunked {
		body = io.MultiReader(body)
	} else if r.body == "" {
		body = nil
	}
	req, err := http.NewRequest(r.method, srv.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get(idem.HeaderReplayed) == "true", body: string(b)}
	if resp.Header.Get("Content-Type") == idem.ContentTypeProblem {
		_ = json.Unmarshal(b, &a.problem)
	}
	return a
}

func ok(status int) bool { return status >= 200 && status < 300 }

var (
	jsonHeader = map[string]string{"Content-Type": "application/json", "X-Channel": "web"}
	formHeader = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	item       = request{"POST", "/items/i1?color=red", jsonHeader, ` + "`" + `{"name": "n", "quantity": 1, "tags": ["a"]}` + "`" + `, false}
	customer   = request{"POST", "/customers?source=web&name=Alice", formHeader, "email=a%40example.com", false}
	update     = request{"PUT", "/customers/c1", jsonHeader, ` + "`" + `{"name": "A"}` + "`" + `, false}
	updateForm = request{"PUT", "/customers/c1?name=Q", formHeader, "email=a%40example.com", false}
)

func TestFingerprintFollowsBinder(t *testing.T) {
	svc, srv := newServer(t, IdempotentHandlerOptions{})
	for _, tc := range []struct {
		name          string
		base, changed request
		// changes says whether the change reaches the typed request:
		// the test's own check that it changes what it means to.
		changes bool
	}{
		{"path parameter", item, item.with(func(r *request) { r.path = "/items/i2?color=red" }), true},
		{"query parameter", item, item.with(func(r *request) { r.path = "/items/i1?color=blue" }), true},
		{"query parameter left out", item, item.with(func(r *request) { r.path = "/items/i1" }), true},
		{"undeclared query parameter", item, item.with(func(r *request) { r.path += "&other=1" }), false},
		{"header parameter", item, item.with(func(r *request) { r.header["X-Channel"] = "app" }), true},
		{"undeclared header", item, item.with(func(r *request) { r.header["X-Other"] = "1" }), false},
		{"body member", item, item.with(func(r *request) { r.body = strings.Replace(r.body, ` + "`" + `"n"` + "`" + `, ` + "`" + `"m"` + "`" + `, 1) }), true},
		{"body array element", item, item.with(func(r *request) { r.body = strings.Replace(r.body, ` + "`" + `["a"]` + "`" + `, ` + "`" + `["a", "b"]` + "`" + `, 1) }), true},
		{"body member order and spacing", item, item.with(func(r *request) { r.body = ` + "`" + `{"tags":["a"],"quantity":1,  "name":"n"}` + "`" + ` }), false},
		{"body member the schema does not name", item, item.with(func(r *request) { r.body = ` + "`" + `{"name": "n", "quantity": 1, "tags": ["a"], "zzz": 1}` + "`" + ` }), false},
		{"body sent chunked", item, item.with(func(r *request) { r.chunked = true }), false},
		{"media type parameter", item, item.with(func(r *request) { r.header["Content-Type"] = "application/json; charset=utf-8" }), false},
		{"form field", customer, customer.with(func(r *request) { r.body = "email=b%40example.com" }), true},
		{"form field from the query", customer, customer.with(func(r *request) { r.path = "/customers?source=web&name=Bob" }), true},
		{"form field in the body, not the query", customer, customer.with(func(r *request) {
			r.path = "/customers?source=web"
			r.body += "&name=Alice"
		}), false},
		{"query parameter of a form operation", customer, customer.with(func(r *request) { r.path = "/customers?source=app&name=Alice" }), true},
		{"form with no body", customer.with(func(r *request) { r.body = "" }), customer.with(func(r *request) {
			r.body = ""
			r.path = "/customers?source=web&name=Bob"
		}), true},
		{"JSON body member, of two media types", update, update.with(func(r *request) { r.body = ` + "`" + `{"name": "B"}` + "`" + ` }), true},
		{"path parameter, of two media types", update, update.with(func(r *request) { r.path = "/customers/c2" }), true},
		{"JSON body sent as a form", update, update.with(func(r *request) {
			r.header = copyHeader(formHeader)
			r.body = "name=A"
		}), true},
		{"form field from the query, of two media types", updateForm, updateForm.with(func(r *request) { r.path = "/customers/c1?name=R" }), true},
		{"form field, of two media types", updateForm, updateForm.with(func(r *request) { r.body = "email=b%40example.com" }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey()
			if a := send(t, srv, tc.base, key); !ok(a.status) || a.replayed {
				t.Fatalf("the first request: %d %s", a.status, a.body)
			}
			before := svc.lastRequest()
			again := send(t, srv, tc.changed, key)
			var fingerprintChanged bool
			switch {
			case again.status == http.StatusUnprocessableEntity && strings.HasSuffix(again.problem.Type, "#idempotency-key-reused"):
				fingerprintChanged = true
			case ok(again.status) && again.replayed:
			default:
				t.Fatalf("the changed request under the first one's key: %d %s, want a replay or a 422", again.status, again.body)
			}
			if a := send(t, srv, tc.changed, newKey()); !ok(a.status) || a.replayed {
				t.Fatalf("the changed request under a key of its own: %d %s", a.status, a.body)
			}
			after := svc.lastRequest()
			typedChanged := !reflect.DeepEqual(before, after)
			if typedChanged != fingerprintChanged {
				t.Errorf("the typed request changed: %v (%s, then %s); the fingerprint changed: %v", typedChanged, show(before), show(after), fingerprintChanged)
			}
			if typedChanged != tc.changes {
				t.Errorf("the typed request changed: %v, want %v (%s, then %s)", typedChanged, tc.changes, show(before), show(after))
			}
		})
	}
}

// show spells a typed request, pointers followed.
func show(request any) string {
	b, err := json.Marshal(request)
	if err != nil {
		return fmt.Sprintf("%+v", request)
	}
	return string(b)
}

func TestFormQueryInFingerprint(t *testing.T) {
	svc, srv := newServer(t, IdempotentHandlerOptions{})
	for _, body := range []string{"email=a%40example.com", ""} {
		key := newKey()
		alice := request{"POST", "/customers?name=Alice", formHeader, body, false}
		first := send(t, srv, alice, key)
		if first.status != http.StatusCreated {
			t.Fatalf("POST /customers?name=Alice with body %q: %d %s", body, first.status, first.body)
		}
		if got := svc.lastRequest().(CreateCustomerRequestObject).Body; got == nil || got.Name == nil || *got.Name != "Alice" {
			t.Fatalf("the typed body of POST /customers?name=Alice: %+v, want name Alice from the query", got)
		}
		if a := send(t, srv, alice, key); a.status != http.StatusCreated || !a.replayed || a.body != first.body {
			t.Errorf("the same request again, body %q: %d replayed=%v %s, want the replay", body, a.status, a.replayed, a.body)
		}
		bob := alice.with(func(r *request) { r.path = "/customers?name=Bob" })
		if a := send(t, srv, bob, key); a.status != http.StatusUnprocessableEntity {
			t.Errorf("POST /customers?name=Bob under Alice's key, body %q: %d replayed=%v %s, want 422", body, a.status, a.replayed, a.body)
		}
	}
	if n := svc.runCount(); n != 2 {
		t.Errorf("createCustomer ran %d times, want 2", n)
	}
	// Without a query the form is the body's alone, and so is the
	// fingerprint: keys stored before the query counted keep matching.
	if a := send(t, srv, request{"POST", "/customers", formHeader, "email=a%40example.com&name=Alice", false}, newKey()); a.status != http.StatusCreated {
		t.Fatalf("POST /customers: %d %s", a.status, a.body)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if !svc.asBefore {
		t.Error("a form without a query has another fingerprint than its body's form alone")
	}
}

func TestTrailingDataIs400(t *testing.T) {
	for _, limit := range []int64{0, -1} { // the default bound, and none
		svc, srv := newServer(t, IdempotentHandlerOptions{MaxBodyBytes: limit})
		// createItem takes JSON only; updateCustomer JSON or a form.
		for _, base := range []request{item, update} {
			testTrailingData(t, svc, srv, base, limit)
		}
	}
}

func testTrailingData(t *testing.T, svc *service, srv *httptest.Server, base request, limit int64) {
	t.Helper()
	value := ` + "`" + `{"name": "a\"}{\\", "tags": ["]", "\\\""]}` + "`" + `
	for _, tc := range []struct {
		body string
		want int
	}{
		{value, 0},
		{value + " \n\t\r\n", 0},
		{value + strings.Repeat(" ", 64<<10), 0},
		{value + "garbage", 400},
		{value + "{}", 400},
		{value + " {}", 400},
		{value + "\n" + value, 400},
		{value + "]", 400},
		{value + "\"", 400},
		{value + strings.Repeat(" ", 64<<10) + "x", 400},
		{"[" + value + "]", 400}, // not the schema's object: the decoder's 400
	} {
		for _, chunked := range []bool{false, true} {
			key := newKey()
			r := base.with(func(r *request) {
				r.body = tc.body
				r.chunked = chunked
			})
			runs := svc.runCount()
			a := send(t, srv, r, key)
			if tc.want == 0 && !ok(a.status) || tc.want != 0 && a.status != tc.want {
				t.Errorf("%s %s, limit %d, body %.80q (chunked %v): %d %s, want %d", base.method, base.path, limit, tc.body, chunked, a.status, a.body, tc.want)
				continue
			}
			if tc.want != 400 {
				continue
			}
			if svc.runCount() != runs {
				t.Errorf("%s %s, limit %d, body %.80q (chunked %v): the handler ran", base.method, base.path, limit, tc.body, chunked)
			}
			if !strings.HasSuffix(a.problem.Type, "#invalid-request") {
				t.Errorf("%s %s, limit %d, body %.80q (chunked %v): problem %+v, want invalid-request", base.method, base.path, limit, tc.body, chunked, a.problem)
			}
			if strings.Contains(tc.body, value+"\n"+value) && !strings.Contains(a.problem.Detail, "after its JSON value") {
				t.Errorf("the problem does not say what to fix: %q", a.problem.Detail)
			}
			// Nothing was claimed: the key serves the request as it should have been.
			if a := send(t, srv, base, key); !ok(a.status) || a.replayed {
				t.Errorf("%s %s, limit %d: the key of a 400 with the request fixed: %d replayed=%v %s, want it run", base.method, base.path, limit, a.status, a.replayed, a.body)
			}
		}
	}
}

func TestBodyNotUTF8Is400(t *testing.T) {
	svc, srv := newServer(t, IdempotentHandlerOptions{})
	for _, body := range []string{"{\"name\": \"caf\xe9\"}", "{\"name\": \"caf\xe8\"}"} {
		for _, chunked := range []bool{false, true} {
			key := newKey()
			runs := svc.runCount()
			a := send(t, srv, item.with(func(r *request) {
				r.body = body
				r.chunked = chunked
			}), key)
			if a.status != 400 || !strings.HasSuffix(a.problem.Type, "#invalid-request") || !strings.Contains(a.problem.Detail, "not valid UTF-8") {
				t.Errorf("body %q (chunked %v): %d %+v, want a 400 invalid-request saying it is not UTF-8", body, chunked, a.status, a.problem)
			}
			if svc.runCount() != runs {
				t.Errorf("body %q (chunked %v): the handler ran", body, chunked)
			}
			if a := send(t, srv, item, key); !ok(a.status) || a.replayed {
				t.Errorf("the key of the refused body, with the request in UTF-8: %d replayed=%v %s, want it run", a.status, a.replayed, a.body)
			}
		}
	}
}

func TestUndeclaredMediaTypeIs415(t *testing.T) {
	svc, srv := newServer(t, IdempotentHandlerOptions{})
	for _, tc := range []struct {
		r      request
		accept []string // the media types the problem must name; nil for no 415
	}{
		{item.with(func(r *request) { r.header["Content-Type"] = "text/plain" }), []string{"application/json"}},
		{item.with(func(r *request) { delete(r.header, "Content-Type") }), []string{"application/json"}},
		{item.with(func(r *request) { r.header["Content-Type"] = "application/x-www-form-urlencoded" }), []string{"application/json"}},
		{item.with(func(r *request) { r.chunked = true; delete(r.header, "Content-Type") }), []string{"application/json"}},
		{item.with(func(r *request) { r.header["Content-Type"] = "application/json; charset=utf-8" }), nil},
		{customer.with(func(r *request) { r.header["Content-Type"] = "application/json" }), []string{"application/x-www-form-urlencoded"}},
		{update.with(func(r *request) { r.header["Content-Type"] = "text/plain" }), []string{"application/json", "application/x-www-form-urlencoded"}},
		{update.with(func(r *request) { delete(r.header, "Content-Type") }), []string{"application/json", "application/x-www-form-urlencoded"}},
		// With no body there is no media type to check.
		{customer.with(func(r *request) { r.body = ""; delete(r.header, "Content-Type") }), nil},
	} {
		key := newKey()
		runs := svc.runCount()
		a := send(t, srv, tc.r, key)
		if tc.accept == nil {
			if !ok(a.status) {
				t.Errorf("%s %s, Content-Type %q: %d %s, want it run", tc.r.method, tc.r.path, tc.r.header["Content-Type"], a.status, a.body)
			}
			continue
		}
		if a.status != http.StatusUnsupportedMediaType || !strings.HasSuffix(a.problem.Type, "#unsupported-media-type") {
			t.Errorf("%s %s, Content-Type %q: %d %s, want 415 unsupported-media-type", tc.r.method, tc.r.path, tc.r.header["Content-Type"], a.status, a.body)
			continue
		}
		for _, mt := range tc.accept {
			if !strings.Contains(a.problem.Detail, mt) {
				t.Errorf("%s %s: the 415 does not name %s: %q", tc.r.method, tc.r.path, mt, a.problem.Detail)
			}
		}
		if svc.runCount() != runs {
			t.Errorf("%s %s, Content-Type %q: the handler ran", tc.r.method, tc.r.path, tc.r.header["Content-Type"])
		}
	}
	// An operation that is not annotated is left alone.
	note := request{"POST", "/notes", map[string]string{"Content-Type": "text/plain"}, ` + "`" + `{"name": "n"}` + "`" + `, false}
	if a := send(t, srv, note, ""); a.status == http.StatusUnsupportedMediaType {
		t.Errorf("POST /notes, not annotated, as text/plain: %d %s", a.status, a.body)
	}
}
`
