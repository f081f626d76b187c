package generator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyPlacementServerKinds generates testdata/keyplacement, whose
// operations read their keys from a header, a JSON body, a form body, a
// query parameter with a body member, and an optional body member, for
// each server kind, and runs the placement suite against it over HTTP:
// TestKeyFromHeader, TestKeyFromBody and TestCompositeKey, and the
// generated conformance helpers, TestPlacementConformance.
func TestKeyPlacementServerKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runTestBinary(t, kindBinary(t, kind), "^TestPlacement_", "")
		})
	}
}

// TestKeyFromHeader runs the suite's test of that name, on std-http.
func TestKeyFromHeader(t *testing.T) {
	t.Parallel()
	runTestBinary(t, kindBinary(t, "std-http"), "^TestPlacement_KeyFromHeader$", "")
}

// TestKeyFromBody runs the suite's test of that name, on std-http.
func TestKeyFromBody(t *testing.T) {
	t.Parallel()
	runTestBinary(t, kindBinary(t, "std-http"), "^TestPlacement_KeyFromBody$", "")
}

// TestCompositeKey runs the suite's test of that name, on std-http.
func TestCompositeKey(t *testing.T) {
	t.Parallel()
	runTestBinary(t, kindBinary(t, "std-http"), "^TestPlacement_CompositeKey$", "")
}

// TestKeyPlacementConformance runs the suite's test of that name, on
// std-http: the generated conformance helpers check every placement.
func TestKeyPlacementConformance(t *testing.T) {
	t.Parallel()
	runTestBinary(t, kindBinary(t, "std-http"), "^TestPlacement_PlacementConformance$", "")
}

// pgMount is mount, a kind's newHandler and newPrefixed on the in-memory
// store, as newPgHandler and newPgPrefixed on the Postgres store's
// transactions.
func pgMount(mount string) string {
	return strings.NewReplacer(
		"memstore.NoTx", "pgx.Tx",
		`"github.com/idemgen/idemgen/idem/memstore"`, `"github.com/jackc/pgx/v5"`,
		"newHandler(", "newPgHandler(",
		"newPrefixed(", "newPgPrefixed(",
	).Replace(mount)
}

// placementConformance runs the generated conformance helpers on the
// placement suite's service: importOrders from the spec's form example,
// the others from requests whose key members the checks replace or add.
const placementConformance = `package kinds_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/idemgen/idemgen/generator/PKG"
	"github.com/idemgen/idemgen/generator/PKG/kindstest"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemtest"
	"github.com/idemgen/idemgen/idem/memstore"
)

// TestPlacementConformance runs this kind's generated conformance
// helpers on the in-memory store, every operation with its keys where
// the spec says it reads them: a header, a JSON member (createNote's,
// a UUID, absent from the request given), a form field, and a query
// parameter with an integer member.
func TestPlacementConformance(t *testing.T) {
	opts := kinds.IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}
	post := func(path, body string) *idemtest.Request {
		return &idemtest.Request{Method: "POST", Path: path, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
	}
	kindstest.Check(t, kinds.NewPlacements(), memstore.New(memstore.Options{}), opts, kindstest.Requests{
		ReceivePaymentEvent: post("/webhooks/payments", ` + "`" + `{"type":"payment.succeeded","data":{"payment":"p1"}}` + "`" + `),
		CreateOrder:         post("/orders", ` + "`" + `{"client_reference":"example","amount":5}` + "`" + `),
		CreateTransfer:      post("/transfers", ` + "`" + `{"line":{"number":1},"amount":5}` + "`" + `),
		CreateNote:          post("/notes", ` + "`" + `{"text":"a"}` + "`" + `),
	})
}
`

const placementSuite = `package kinds

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

const principalKey = "principal"

func TestMain(m *testing.M) { pgtest.Main(m) }

// placements counts the runs of each operation, and answers with the
// count, so that a replay shows the run it replays.
type placements[T any] struct{ *runs }

type runs struct {
	events, orders, imports, transfers, notes atomic.Int64
}

// NewPlacements is the service for the external conformance test.
func NewPlacements() IdempotentServer[memstore.NoTx] { return &placements[memstore.NoTx]{&runs{}} }

func (s *placements[T]) ReceivePaymentEvent(_ context.Context, _ *idem.Attempt[T], _ ReceivePaymentEventRequestObject) (ReceivePaymentEventResponseObject, error) {
	return ReceivePaymentEvent200JSONResponse{Run: int(s.events.Add(1))}, nil
}

func (s *placements[T]) CreateOrder(_ context.Context, _ *idem.Attempt[T], _ CreateOrderRequestObject) (CreateOrderResponseObject, error) {
	return CreateOrder201JSONResponse{Run: int(s.orders.Add(1))}, nil
}

func (s *placements[T]) ImportOrders(_ context.Context, _ *idem.Attempt[T], _ ImportOrdersRequestObject) (ImportOrdersResponseObject, error) {
	return ImportOrders201JSONResponse{Run: int(s.imports.Add(1))}, nil
}

func (s *placements[T]) CreateTransfer(_ context.Context, _ *idem.Attempt[T], _ CreateTransferRequestObject) (CreateTransferResponseObject, error) {
	return CreateTransfer201JSONResponse{Run: int(s.transfers.Add(1))}, nil
}

func (s *placements[T]) CreateNote(_ context.Context, _ *idem.Attempt[T], _ CreateNoteRequestObject) (CreateNoteResponseObject, error) {
	return CreateNote201JSONResponse{Run: int(s.notes.Add(1))}, nil
}

type answer struct {
	status   int
	replayed bool
	problem  string // the problem's type, "" for none
	detail   string
	run      int
}

// sender sends requests to a fresh server of the placements.
type sender struct {
	t   *testing.T
	url string
	svc *runs
}

// onStores runs test on a fresh server of the placements on each store:
// the in-memory one, and PostgreSQL's.
func onStores(t *testing.T, test func(t *testing.T, s *sender)) {
	opts := IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}
	serve := func(t *testing.T, h http.Handler, svc *runs) *sender {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return &sender{t: t, url: srv.URL, svc: svc}
	}
	t.Run("memstore", func(t *testing.T) {
		svc := &placements[memstore.NoTx]{&runs{}}
		test(t, serve(t, newHandler(svc, memstore.New(memstore.Options{}), opts), svc.runs))
	})
	// Mounted under a router prefix, as an API's routes often are: the
	// gate finds each route's key sources under it.
	t.Run("memstore/prefix", func(t *testing.T) {
		svc := &placements[memstore.NoTx]{&runs{}}
		prefixed := opts
		prefixed.BaseURL = "/api"
		s := serve(t, newHandler(svc, memstore.New(memstore.Options{}), prefixed), svc.runs)
		s.url += "/api"
		test(t, s)
	})
	t.Run("pgstore", func(t *testing.T) {
		pool := pgtest.NewPool(t)
		if err := pgstore.Migrate(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
		svc := &placements[pgx.Tx]{&runs{}}
		test(t, serve(t, newPgHandler(svc, pgstore.New(pool, pgstore.Options{}), opts), svc.runs))
	})
}

func (s *sender) send(method, path, contentType, body string, header http.Header) answer {
	s.t.Helper()
	r, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		r.Header[k] = v
	}
	r.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get(idem.HeaderReplayed) == "true"}
	var v struct {
		Type   string ` + "`json:\"type\"`" + `
		Detail string ` + "`json:\"detail\"`" + `
		Run    int    ` + "`json:\"run\"`" + `
	}
	if err := json.Unmarshal(data, &v); err != nil {
		s.t.Fatalf("%s %s: answer %d %q is not JSON: %v", method, path, resp.StatusCode, data, err)
	}
	a.problem, a.detail, a.run = v.Type, v.Detail, v.Run
	return a
}

func (s *sender) event(id, body string, extra ...string) answer {
	s.t.Helper()
	h := http.Header{}
	if id != "" {
		h["Webhook-Id"] = []string{id}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Add(extra[i], extra[i+1])
	}
	return s.send("POST", "/webhooks/payments", "application/json", body, h)
}

// want checks an answer: its status, whether it is a replay, and the
// run it carries (0: a problem, whose type is checked instead).
func want(t *testing.T, what string, got answer, status int, replayed bool, run int, problem string) {
	t.Helper()
	if got.status != status || got.replayed != replayed || (run != 0 && got.run != run) || got.problem != problem {
		t.Fatalf("%s: got %+v; want status %d, replayed %v, run %d, problem %q", what, got, status, replayed, run, problem)
	}
}

// TestKeyFromHeader: a webhook keyed by its Webhook-Id header runs once
// per delivery id, its redeliveries are replays, and the header is the
// key whatever Idempotency-Key says.
func TestKeyFromHeader(t *testing.T) { onStores(t, testKeyFromHeader) }

func testKeyFromHeader(t *testing.T, s *sender) {
	first := ` + "`" + `{"type":"payment.succeeded","delivered_at":"t1","data":{"payment":"p1"}}` + "`" + `
	want(t, "first delivery", s.event("msg_1", first), 200, false, 1, "")
	want(t, "redelivery", s.event("msg_1", first), 200, true, 1, "")
	want(t, "redelivery with another Idempotency-Key", s.event("msg_1", first, "Idempotency-Key", "other"), 200, true, 1, "")
	want(t, "another delivery id", s.event("msg_2", first), 200, false, 2, "")

	missing := s.event("", first, "Idempotency-Key", "k1")
	want(t, "no Webhook-Id, an Idempotency-Key", missing, 400, false, 0, idem.TypeMissingKey)
	if !strings.Contains(missing.detail, "Webhook-Id header") {
		t.Errorf("the missing-key detail does not name the header: %q", missing.detail)
	}
	empty := s.event("", first, "Webhook-Id", "")
	want(t, "an empty Webhook-Id", empty, 400, false, 0, idem.TypeInvalidKey)
	if !strings.Contains(empty.detail, "Webhook-Id header is empty") {
		t.Errorf("the invalid-key detail does not say the header is empty: %q", empty.detail)
	}
	twice := s.event("msg_3", first, "Webhook-Id", "msg_4")
	want(t, "Webhook-Id twice", twice, 400, false, 0, idem.TypeInvalidKey)
	reused := s.event("msg_1", ` + "`" + `{"type":"payment.failed","delivered_at":"t1","data":{}}` + "`" + `)
	want(t, "another event under msg_1", reused, 422, false, 0, idem.TypeKeyReused)
	if !strings.Contains(reused.detail, "Webhook-Id") {
		t.Errorf("the 422 detail does not name the header: %q", reused.detail)
	}
	if n := s.svc.events.Load(); n != 2 {
		t.Fatalf("the webhook ran %d times; want 2", n)
	}

	// Concurrent redeliveries of one new delivery: it runs once, and
	// each is answered with that answer or a 409.
	var wg sync.WaitGroup
	answers := make([]answer, 20)
	for i := range answers {
		wg.Go(func() {
			r, _ := http.NewRequest("POST", s.url+"/webhooks/payments", strings.NewReader(first))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Webhook-Id", "msg_race")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			answers[i] = answer{status: resp.StatusCode}
		})
	}
	wg.Wait()
	for _, a := range answers {
		if a.status != 200 && a.status != 409 {
			t.Fatalf("a concurrent redelivery was answered %d; want 200 or 409", a.status)
		}
	}
	if n := s.svc.events.Load(); n != 3 {
		t.Fatalf("20 concurrent deliveries of msg_race ran the webhook %d times in all; want it once more, 3", n)
	}
}

// TestKeyFromBody: a JSON body member and a form field are the key; a
// different body under it is a 422; an empty or missing one is a 400.
func TestKeyFromBody(t *testing.T) { onStores(t, testKeyFromBody) }

func testKeyFromBody(t *testing.T, s *sender) {
	order := func(body string, key string) answer {
		h := http.Header{}
		if key != "" {
			h.Set("Idempotency-Key", key)
		}
		return s.send("POST", "/orders", "application/json", body, h)
	}
	want(t, "first order", order(` + "`" + `{"client_reference":"r1","amount":5}` + "`" + `, "a"), 201, false, 1, "")
	want(t, "retry, another Idempotency-Key", order(` + "`" + `{"amount":5,"client_reference":"r1"}` + "`" + `, "b"), 201, true, 1, "")
	want(t, "another amount under r1", order(` + "`" + `{"client_reference":"r1","amount":6}` + "`" + `, ""), 422, false, 0, idem.TypeKeyReused)
	want(t, "another reference", order(` + "`" + `{"client_reference":"r2","amount":5}` + "`" + `, ""), 201, false, 2, "")
	want(t, "an empty reference", order(` + "`" + `{"client_reference":"","amount":5}` + "`" + `, ""), 400, false, 0, idem.TypeInvalidKey)
	if a := order(` + "`" + `{"amount":5}` + "`" + `, "c"); a.status != 400 {
		t.Fatalf("no client_reference: got %+v; want a 400", a)
	}
	if n := s.svc.orders.Load(); n != 2 {
		t.Fatalf("createOrder ran %d times; want 2", n)
	}

	form := func(v url.Values) answer {
		return s.send("POST", "/imports", "application/x-www-form-urlencoded", v.Encode(), nil)
	}
	want(t, "first import", form(url.Values{"po_number": {"PO-1"}, "lines": {"3"}}), 201, false, 1, "")
	want(t, "import retried", form(url.Values{"po_number": {"PO-1"}, "lines": {"3"}}), 201, true, 1, "")
	want(t, "another import under PO-1", form(url.Values{"po_number": {"PO-1"}, "lines": {"4"}}), 422, false, 0, idem.TypeKeyReused)
	want(t, "another PO", form(url.Values{"po_number": {"PO-2"}, "lines": {"3"}}), 201, false, 2, "")
	if a := form(url.Values{"lines": {"3"}}); a.status != 400 {
		t.Fatalf("no po_number: got %+v; want a 400", a)
	}
	if n := s.svc.imports.Load(); n != 2 {
		t.Fatalf("importOrders ran %d times; want 2", n)
	}

	// An optional key: without it every request runs; with it, once.
	note := func(body string) answer { return s.send("POST", "/notes", "application/json", body, nil) }
	want(t, "a note without a reference", note(` + "`" + `{"text":"a"}` + "`" + `), 201, false, 1, "")
	want(t, "the same note again", note(` + "`" + `{"text":"a"}` + "`" + `), 201, false, 2, "")
	ref := ` + "`" + `{"reference":"4b0c8b3e-5d0c-4a4b-9a43-0a1f0b9e0c11","text":"a"}` + "`" + `
	want(t, "a note with a reference", note(ref), 201, false, 3, "")
	want(t, "that note again", note(ref), 201, true, 3, "")
}

// TestCompositeKey: a key of a query parameter and a body member is the
// pair: each part tells requests apart, and the gate answers a missing
// or repeated query part as the protocol's problem.
func TestCompositeKey(t *testing.T) { onStores(t, testCompositeKey) }

func testCompositeKey(t *testing.T, s *sender) {
	transfer := func(query, body string) answer {
		return s.send("POST", "/transfers"+query, "application/json", body, nil)
	}
	one := ` + "`" + `{"line":{"number":1},"amount":5}` + "`" + `
	want(t, "first transfer", transfer("?batch=b1", one), 201, false, 1, "")
	want(t, "retried", transfer("?batch=b1", one), 201, true, 1, "")
	want(t, "another batch", transfer("?batch=b2", one), 201, false, 2, "")
	want(t, "another line", transfer("?batch=b1", ` + "`" + `{"line":{"number":2},"amount":5}` + "`" + `), 201, false, 3, "")
	want(t, "another amount", transfer("?batch=b1", ` + "`" + `{"line":{"number":1},"amount":6}` + "`" + `), 422, false, 0, idem.TypeKeyReused)
	missing := transfer("", one)
	want(t, "no batch", missing, 400, false, 0, idem.TypeMissingKey)
	if !strings.Contains(missing.detail, "batch query parameter") {
		t.Errorf("the missing-key detail does not name the query parameter: %q", missing.detail)
	}
	want(t, "batch twice", transfer("?batch=b1&batch=b2", one), 400, false, 0, idem.TypeInvalidKey)
	if n := s.svc.transfers.Load(); n != 3 {
		t.Fatalf("createTransfer ran %d times; want 3", n)
	}
}
`

// TestKeyPlacementDocumented: an operation keyed elsewhere than the
// Idempotency-Key header gets no such parameter in the augmented spec,
// which says where its key is read from instead, and its client method
// sends no Idempotency-Key (augment_test.go covers operations keyed by
// the header).
func TestKeyPlacementDocumented(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, filepath.Join("testdata", "keyplacement", "idemgen.yaml"))
	cfg.Output.Spec = "gen/openapi.yaml"
	res := generate(t, cfg)
	var spec, client string
	for _, f := range res.Files {
		switch filepath.Base(f.Path) {
		case "openapi.yaml":
			spec = string(f.Content)
		case "idempotency_client.gen.go":
			client = string(f.Content)
		}
	}
	if spec == "" || client == "" {
		t.Fatal("no augmented spec or client generated")
	}
	if strings.Contains(spec, "name: Idempotency-Key") {
		t.Error("the augmented spec declares an Idempotency-Key parameter on operations keyed elsewhere")
	}
	for _, want := range []string{"the idempotency key is read from the Webhook-Id header", "read from /client_reference in the body", "read from the batch query parameter and /line/number in the body"} {
		if !strings.Contains(spec, want) {
			t.Errorf("the augmented spec does not say %q", want)
		}
	}
	if strings.Contains(client, "idemclient.WithKey") {
		t.Error("the client sends an Idempotency-Key on operations keyed elsewhere")
	}
	if !strings.Contains(client, "its key is in the request itself (from the Webhook-Id header)") {
		t.Error("the client's ReceivePaymentEvent does not say where its key is")
	}
}

// TestKitExamplesLeaveTheKeyToTheChecks: the request the conformance
// helpers build from the spec's examples needs no example of a key
// part, whose values the checks place themselves: neither the key's
// header nor its required query parameter. A form body is built from its
// example, and one the helpers cannot encode says what to set.
func TestKitExamplesLeaveTheKeyToTheChecks(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("testdata", "keyplacement", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := string(src)
	for _, r := range []struct{ old, new string }{
		// No example for the Webhook-Id header; one for the event.
		{"schema: {type: string, example: msg_1}", "schema: {type: string}"},
		{`schema: {$ref: "#/components/schemas/Event"}`, `schema: {$ref: "#/components/schemas/Event"}
            example: {type: payment.succeeded, data: {payment: p1}}`},
		// The transfer's batch, a required query parameter, has none.
		{"                amount: {type: integer}\n      responses:\n        \"201\":\n          description: Transferred.",
			"                amount: {type: integer}\n            example: {line: {number: 1}, amount: 5}\n      responses:\n        \"201\":\n          description: Transferred."},
		// A form example with a nested value.
		{"example: {po_number: PO-1, lines: 3}", "example: {po_number: PO-1, lines: {n: 3}}"},
	} {
		if !strings.Contains(spec, r.old) {
			t.Fatalf("the spec has no %q", r.old)
		}
		spec = strings.Replace(spec, r.old, r.new, 1)
	}
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	writeFile(t, path, []byte(spec))
	res := generate(t, configFor(t, filepath.Join("testdata", "keyplacement"), path, "tests: true\n"))
	var kit string
	for _, f := range res.Files {
		if strings.HasSuffix(f.Path, "conformance.gen.go") {
			kit = string(f.Content)
		}
	}
	for _, want := range []string{
		"Path:   opts.BaseURL + \"/webhooks/payments\",",
		"Body: []byte(`{\"data\":{\"payment\":\"p1\"},\"type\":\"payment.succeeded\"}`),",
		"Path:   opts.BaseURL + \"/transfers\",",
		"Body: []byte(`{\"amount\":5,\"line\":{\"number\":1}}`),",
		`t.Fatal("set Requests.ImportOrders: the spec has no example request for importOrders (the form request body's example has a nested value in lines, which the helpers cannot encode; supply the request)")`,
	} {
		if !strings.Contains(kit, want) {
			t.Errorf("the conformance helpers do not say %s", want)
		}
	}
	if strings.Contains(kit, `"Webhook-Id": {`) {
		t.Error("the request built from the examples sets the key's header, which the checks place")
	}
}
