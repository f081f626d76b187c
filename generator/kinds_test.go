package generator_test

import (
	"strings"
	"testing"

	// The generated code of the chi, echo and gin server kinds imports
	// their routers; compiling it in this module needs them among the
	// module's requirements, which go mod tidy keeps only for an import it
	// sees.
	_ "github.com/gin-gonic/gin"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/labstack/echo/v4"
)

// TestServerKinds runs one protocol suite over HTTP against the example's
// spec generated for each server kind, mounted the way that router mounts
// things: every row of the protocol table that needs no database, a
// 50-way race for one key, tenant isolation by the spec's scope header,
// and a value a router middleware set reaching the handler. The tests of
// the suite that have a test of their own here are left to it.
func TestServerKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runTestBinary(t, kindBinary(t, kind), "^TestKinds_", "^TestKinds_BodyBoundUnderPrefix$")
		})
	}
}

// TestBodyBoundUnderPrefix runs the suite's test of that name on every
// server kind: an annotated operation's body is bounded, and an
// unannotated one's is not, wherever the routes are mounted.
func TestBodyBoundUnderPrefix(t *testing.T) {
	t.Parallel()
	for _, kind := range serverKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runTestBinary(t, kindBinary(t, kind), "^TestKinds_BodyBoundUnderPrefix$", "")
		})
	}
}

var serverKinds = []string{"std-http", "chi", "echo", "gin"}

// mounts hold each kind's newHandler: the layer mounted on that router,
// behind a middleware in the router's own style that stores the caller's
// principal, which the suite's handler requires; and its newPrefixed,
// the same mounted under prefix the router's own way (a group, a mount
// point, a stripped prefix), not through BaseURL.
var mounts = map[string]string{
	"std-http": strings.Replace(httpMount, "IMPORT", "", 1) + `
func newPrefixed(prefix string, impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, newHandler(impl, store, opts)))
	return mux
}
`,
	"chi": strings.Replace(httpMount, "IMPORT", `"github.com/go-chi/chi/v5"`, 1) + `
func newPrefixed(prefix string, impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	r := chi.NewRouter()
	r.Mount(prefix, newHandler(impl, store, opts))
	return r
}
`,
	"echo": `package kinds

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	return newPrefixed("", impl, store, opts)
}

func newPrefixed(prefix string, impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(principalKey, "p1")
			return next(c)
		}
	})
	if prefix == "" {
		RegisterIdempotentHandlers(e, impl, store, opts)
	} else {
		RegisterIdempotentHandlers(e.Group(prefix), impl, store, opts)
	}
	return e
}
`,
	"gin": `package kinds

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	return newPrefixed("", impl, store, opts)
}

func newPrefixed(prefix string, impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	gin.SetMode(gin.ReleaseMode) // no debug route listing
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set(principalKey, "p1") })
	if prefix == "" {
		RegisterIdempotentHandlers(r, impl, store, opts)
	} else {
		RegisterIdempotentHandlers(r.Group(prefix), impl, store, opts)
	}
	return r
}
`,
}

// httpMount is newHandler of std-http and chi; IMPORT is for more imports.
const httpMount = `package kinds

import (
	"context"
	"net/http"

	IMPORT
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

func newHandler(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
	opts.Middlewares = []MiddlewareFunc{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, "p1")))
		})
	}}
	return NewIdempotentHandler(impl, store, opts)
}
`

const conformanceTest = `package kinds_test

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

// TestConformance runs this kind's generated conformance helpers on the
// in-memory store: createOrder from the spec's examples, createPayment
// from a request given.
func TestConformance(t *testing.T) {
	opts := kinds.IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}
	kindstest.Check(t, kinds.NewService(), memstore.New(memstore.Options{}), opts, kindstest.Requests{
		CreatePayment: &idemtest.Request{
			Method: "POST",
			Path:   "/payments",
			Header: http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"a1"}},
			Body:   []byte(` + "`" + `{"order_id": "ord_1", "amount_cents": 100}` + "`" + `),
		},
	})
}
`

const protocolSuite = `package kinds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// service counts createOrder's runs; an order for customer "slow" waits
// for release, and failNext makes the next run fail. With
// requirePrincipal, createOrder fails unless the router middleware's
// principal reached it.
type service struct {
	runs             atomic.Int64
	baselineRuns     atomic.Int64
	failNext         atomic.Bool
	entered          chan struct{}
	release          chan struct{}
	requirePrincipal bool
}

// principalKey is where each kind's router middleware stores the caller.
const principalKey = "principal"

func (s *service) CreateOrder(ctx context.Context, at *idem.Attempt[memstore.NoTx], req CreateOrderRequestObject) (CreateOrderResponseObject, error) {
	if p, _ := ctx.Value(principalKey).(string); s.requirePrincipal && p != "p1" {
		return nil, fmt.Errorf("the router middleware's principal is %q in the handler's context, want p1", p)
	}
	n := s.runs.Add(1)
	if s.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("the handler failed")
	}
	if req.Body.CustomerId == "slow" {
		s.entered <- struct{}{}
		<-s.release
	}
	id := fmt.Sprintf("ord_%d", n)
	return CreateOrder201JSONResponse{
		Body:    Order{Id: id, AccountId: req.Params.XAccountId, AmountCents: req.Body.AmountCents, Currency: req.Body.Currency, CustomerId: req.Body.CustomerId, CreatedAt: time.Unix(0, 0).UTC()},
		Headers: CreateOrder201ResponseHeaders{Location: "/orders/" + id},
	}, nil
}

func (s *service) CreateOrderBaseline(context.Context, CreateOrderBaselineRequestObject) (CreateOrderBaselineResponseObject, error) {
	s.baselineRuns.Add(1)
	return CreateOrderBaseline400ApplicationProblemPlusJSONResponse{}, nil
}

func (s *service) ListOrders(context.Context, ListOrdersRequestObject) (ListOrdersResponseObject, error) {
	return ListOrders200JSONResponse{}, nil
}

func (s *service) CreateExport(context.Context, *idem.Attempt[memstore.NoTx], CreateExportRequestObject) (CreateExportResponseObject, error) {
	return CreateExport201JSONResponse{Id: "exp_1", Csv: "id\n"}, nil
}

func (s *service) GetOrder(context.Context, GetOrderRequestObject) (GetOrderResponseObject, error) {
	return GetOrder404ApplicationProblemPlusJSONResponse{}, nil
}

func (s *service) CreatePayment(context.Context, *idem.Attempt[memstore.NoTx], CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentPaymentCreated), nil
}

func (s *service) CreatePaymentAfterPaymentCreated(context.Context, *idem.Attempt[memstore.NoTx], CreatePaymentRequestObject) (CreatePaymentStep, error) {
	return CreatePaymentNext(CreatePaymentChargeCreated), nil
}

func (s *service) CreatePaymentAfterChargeCreated(_ context.Context, _ *idem.Attempt[memstore.NoTx], req CreatePaymentRequestObject) (CreatePaymentResponseObject, error) {
	return CreatePayment201JSONResponse{Body: Payment{Id: "pay_1", OrderId: req.Body.OrderId, AmountCents: req.Body.AmountCents, Status: "succeeded"}, Headers: CreatePayment201ResponseHeaders{Location: "/payments/pay_1"}}, nil
}

// ImportOrders answers with the purchase order's number.
func (s *service) ImportOrders(_ context.Context, _ *idem.Attempt[memstore.NoTx], req ImportOrdersRequestObject) (ImportOrdersResponseObject, error) {
	return ImportOrders201JSONResponse{PoNumber: req.Body.PoNumber, Orders: []Order{}}, nil
}

// ReceivePaymentEvent acknowledges every event.
func (s *service) ReceivePaymentEvent(_ context.Context, _ *idem.Attempt[memstore.NoTx], req ReceivePaymentEventRequestObject) (ReceivePaymentEventResponseObject, error) {
	return ReceivePaymentEvent200JSONResponse{Type: req.Body.Type}, nil
}

// NewService is the service for the external conformance test.
func NewService() IdempotentServer[memstore.NoTx] {
	return &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// TestMissingScopeHeaderIsInvalidScope: the header that scopes the keys
// (X-Account-Id) absent, empty, sent twice or joined by a proxy is the
// protocol's invalid-scope problem, before the parameters' binder or any
// store round trip, and nothing runs.
func TestMissingScopeHeaderIsInvalidScope(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	for _, tc := range []struct {
		name     string
		accounts []string
	}{
		{"absent", nil},
		{"empty", []string{""}},
		{"twice", []string{"a1", "a2"}},
		{"joined", []string{"a1, a2"}},
	} {
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader("{\"amount_cents\": 100, \"currency\": \"EUR\", \"customer_id\": \"c\"}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "scope-"+tc.name)
		for _, a := range tc.accounts {
			req.Header.Add("X-Account-Id", a)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p idem.Problem
		if err := json.Unmarshal(b, &p); err != nil || resp.StatusCode != 400 || p.Type != idem.TypeInvalidScope || !strings.Contains(p.Detail, "X-Account-Id") {
			t.Errorf("scope header %s: %d %s, want 400 %s naming X-Account-Id", tc.name, resp.StatusCode, b, idem.TypeInvalidScope)
		}
	}
	if got := svc.runs.Load(); got != 0 {
		t.Errorf("createOrder ran %d times, want none", got)
	}
}

// TestInvalidBodyBeforeClaim: a body that breaks the spec's schema
// (customer_id is at most 64 characters) is the invalid-request problem
// from the gate, naming the member, and nothing runs; its key was not
// claimed, so a valid request then runs under it.
func TestInvalidBodyBeforeClaim(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	post := func(customer string) (int, idem.Problem) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader("{\"amount_cents\": 100, \"currency\": \"EUR\", \"customer_id\": \""+customer+"\"}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "invalid-then-valid")
		req.Header.Set("X-Account-Id", "a1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p idem.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p
	}
	if status, p := post(strings.Repeat("c", 65)); status != 400 || p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, "/customer_id") {
		t.Fatalf("customer_id over its maxLength: %d %+v, want 400 %s naming /customer_id", status, p, idem.TypeInvalidRequest)
	}
	if got := svc.runs.Load(); got != 0 {
		t.Fatalf("createOrder ran %d times for an invalid body", got)
	}
	if status, p := post("c"); status != 201 {
		t.Fatalf("a valid body under the same key: %d %+v, want 201", status, p)
	}
	if got := svc.runs.Load(); got != 1 {
		t.Errorf("createOrder ran %d times, want 1", got)
	}
}

// TestMediaTypes: an annotated operation parses the Content-Type (type
// and subtype case-insensitive, parameters apart) and matches it exactly,
// as its unannotated twin accepts it; a look-alike type is a 415 and runs
// nothing.
func TestMediaTypes(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	for i, tc := range []struct {
		ct   string
		want int
	}{
		{"APPLICATION/JSON", 201},
		{"application/JSON; charset=utf-8", 201},
		{"Application/Json;charset=\"utf-8\"", 201},
		{"application/jsonfoo", 415},
		{"application/json5", 415},
		{"application/vnd.api+json", 415},
	} {
		body := fmt.Sprintf("{\"amount_cents\": 100, \"currency\": \"EUR\", \"customer_id\": \"c%d\"}", i)
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tc.ct)
		req.Header.Set("X-Account-Id", "a1")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("mt%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Content-Type %q: %d %s, want %d", tc.ct, resp.StatusCode, b, tc.want)
		}
	}
	if got := svc.runs.Load(); got != 3 {
		t.Errorf("createOrder ran %d times, want 3: once per accepted media type", got)
	}
}

// TestBodyLimitOnAnnotatedOnly: MaxBodyBytes bounds the bodies of
// annotated operations, which the protocol buffers whole, and leaves the
// others' to the user's own middlewares.
func TestBodyLimitOnAnnotatedOnly(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
	opts := IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}, MaxBodyBytes: 64}
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), opts))
	defer srv.Close()
	body := ` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": "` + "`" + ` + strings.Repeat("c", 100) + ` + "`" + `"}` + "`" + `
	small := ` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": "c"}` + "`" + `
	for _, tc := range []struct {
		path, body string
		chunked    bool
		want       int
	}{
		{"/orders", body, false, 413},
		{"/baseline/orders", body, false, 400},
		// Of undeclared length, the body is decoded as it arrives: a value
		// past the limit fails the decoder, and a value within it followed
		// by too much is caught after it.
		{"/orders", body, true, 413},
		{"/orders", small + strings.Repeat(" ", 64), true, 413},
	} {
		var r io.Reader = strings.NewReader(tc.body)
		if tc.chunked {
			r = io.MultiReader(r) // of unknown length: sent chunked
		}
		req, _ := http.NewRequest("POST", srv.URL+tc.path, r)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", "a1")
		req.Header.Set("Idempotency-Key", "k-limit")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s with a %d-byte body (chunked %v): %d %s, want %d", tc.path, len(tc.body), tc.chunked, resp.StatusCode, b, tc.want)
		}
	}
	if svc.runs.Load() != 0 {
		t.Errorf("createOrder ran %d times", svc.runs.Load())
	}

	// createPayment's annotation sets max-body: 64KiB, over the option's
	// default; createOrder keeps the default for JSON, 1 MiB.
	srv2 := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv2.Close()
	big := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"/payments", ` + "`" + `{"order_id": "` + "`" + ` + big + ` + "`" + `", "amount_cents": 100}` + "`" + `, 413},
		// Large in its whitespace: customer_id's schema allows 64 characters.
		{"/orders", "{" + strings.Repeat(" ", 70<<10) + ` + "`" + `"amount_cents": 100, "currency": "EUR", "customer_id": "c"}` + "`" + `, 201},
		// Without max-body or the option, a JSON body gets 1 MiB.
		{"/orders", ` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": "` + "`" + ` + strings.Repeat("x", 1<<20) + ` + "`" + `"}` + "`" + `, 413},
	} {
		req, _ := http.NewRequest("POST", srv2.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", "a1")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-big-%d", len(tc.body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s with a %d-byte body: %d %.200s, want %d", tc.path, len(tc.body), resp.StatusCode, b, tc.want)
		}
	}
}

// TestBodyBoundUnderPrefix: an annotated operation's body is bounded on
// its own route, however the routes are mounted: at the root, under
// BaseURL, or under a prefix of the router's own (a std-http
// http.StripPrefix, a chi Mount, an echo Group, a gin RouterGroup). An
// over-limit body is a 413 and never runs the handler, by the handler's
// MaxBodyBytes or the 1 MiB default, declared or chunked; a body within
// it runs; an unannotated operation's body is left unbounded.
func TestBodyBoundUnderPrefix(t *testing.T) {
	for _, m := range []struct {
		name, prefix string
		handler      func(IdempotentServer[memstore.NoTx], idem.Store[memstore.NoTx], IdempotentHandlerOptions) http.Handler
	}{
		{"root", "", newHandler},
		{"base-url", "/v1", func(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
			opts.BaseURL = "/v1"
			return newHandler(impl, store, opts)
		}},
		{"router-prefix", "/v1", func(impl IdempotentServer[memstore.NoTx], store idem.Store[memstore.NoTx], opts IdempotentHandlerOptions) http.Handler {
			return newPrefixed("/v1", impl, store, opts)
		}},
	} {
		t.Run(m.name, func(t *testing.T) {
			svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{})}
			logger := slog.New(slog.DiscardHandler)
			bounded := httptest.NewServer(m.handler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: logger}, MaxBodyBytes: 64}))
			defer bounded.Close()
			byDefault := httptest.NewServer(m.handler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: logger}}))
			defer byDefault.Close()
			order := func(customer string) string {
				return ` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": "` + "`" + ` + customer + ` + "`" + `"}` + "`" + `
			}
			key := 0
			post := func(srv *httptest.Server, path, body string, chunked bool) (int, string) {
				t.Helper()
				var r io.Reader = strings.NewReader(body)
				if chunked {
					r = io.MultiReader(r) // of unknown length: sent chunked
				}
				req, err := http.NewRequest("POST", srv.URL+m.prefix+path, r)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Account-Id", "a1")
				key++
				req.Header.Set("Idempotency-Key", fmt.Sprintf("k-prefix-%d", key))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var p idem.Problem
				_ = json.Unmarshal(b, &p)
				return resp.StatusCode, p.Type
			}
			big := order(strings.Repeat("c", 100))
			huge := order(strings.Repeat("c", 2<<20))
			for _, tc := range []struct {
				srv     *httptest.Server
				path    string
				body    string
				chunked bool
				want    int
			}{
				{bounded, "/orders", big, false, 413},
				{bounded, "/orders", big, true, 413},
				{byDefault, "/orders", huge, false, 413},
				{byDefault, "/orders", huge, true, 413},
			} {
				if status, typ := post(tc.srv, tc.path, tc.body, tc.chunked); status != tc.want || !strings.HasSuffix(typ, "#body-too-large") {
					t.Errorf("POST %s%s, a %d-byte body (chunked %v): %d %s, want %d body-too-large", m.prefix, tc.path, len(tc.body), tc.chunked, status, typ, tc.want)
				}
			}
			if n := svc.runs.Load(); n != 0 {
				t.Fatalf("createOrder ran %d times for bodies over its bound", n)
			}
			if status, _ := post(bounded, "/orders", order("c"), false); status != 201 {
				t.Errorf("POST %s/orders within the bound: %d, want 201", m.prefix, status)
			}
			if status, _ := post(byDefault, "/orders", "{"+strings.Repeat(" ", 70<<10)+order("c")[1:], true); status != 201 {
				t.Errorf("POST %s/orders, 70 KiB chunked, within the default bound: %d, want 201", m.prefix, status)
			}
			if n := svc.runs.Load(); n != 2 {
				t.Fatalf("createOrder ran %d times, want 2", n)
			}
			// createOrderBaseline is not annotated: its bodies are the
			// user's to bound. Its handler answers 400 when it runs.
			for _, srv := range []*httptest.Server{bounded, byDefault} {
				if status, _ := post(srv, "/baseline/orders", huge, false); status != 400 {
					t.Errorf("POST %s/baseline/orders, a %d-byte body: %d, want the handler's 400", m.prefix, len(huge), status)
				}
			}
			if n := svc.baselineRuns.Load(); n != 2 {
				t.Errorf("createOrderBaseline ran %d times, want 2: its bodies are not bounded", n)
			}
		})
	}
}

type reply struct {
	status int
	header http.Header
	body   string
	typ    string // the problem type, if any
}

func TestProtocol(t *testing.T) {
	svc := &service{entered: make(chan struct{}, 1), release: make(chan struct{}), requirePrincipal: true}
	srv := httptest.NewServer(newHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(account, body string, keys ...string) (reply, error) {
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		if err != nil {
			return reply{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		if account != "" {
			req.Header.Set("X-Account-Id", account)
		}
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		var p idem.Problem
		_ = json.Unmarshal(b, &p)
		return reply{resp.StatusCode, resp.Header, string(b), p.Type}, err
	}
	post := func(account, body string, keys ...string) reply {
		t.Helper()
		r, err := send(account, body, keys...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	order := func(customer string) string {
		return fmt.Sprintf(` + "`" + `{"amount_cents": 100, "currency": "EUR", "customer_id": %q}` + "`" + `, customer)
	}
	runs := func(want int64) {
		t.Helper()
		if got := svc.runs.Load(); got != want {
			t.Fatalf("createOrder ran %d times, want %d", got, want)
		}
	}

	if r := post("a1", order("c")); r.status != 400 || r.typ != idem.TypeMissingKey {
		t.Fatalf("no key: %+v", r)
	}
	if r := post("a1", order("c"), "k", "k"); r.status != 400 || r.typ != idem.TypeInvalidKey {
		t.Fatalf("key twice: %+v", r)
	}
	if r := post("a1", ` + "`" + `{"amount_cents": "lots"}` + "`" + `, "k0"); r.status != 400 || r.typ != idem.TypeInvalidRequest {
		t.Fatalf("body that does not decode: %+v", r)
	}
	if r := post("", order("c"), "k0"); r.status != 400 || r.typ != idem.TypeInvalidScope || r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.body, "X-Account-Id") {
		t.Fatalf("no account header: %+v", r)
	}
	runs(0)

	first := post("a1", order("c"), "k1")
	if first.status != 201 || first.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("first: %+v", first)
	}
	replay := post("a1", order("c"), "k1")
	if replay.status != 201 || replay.body != first.body || replay.header.Get(idem.HeaderReplayed) != "true" || replay.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("replay: %+v, want %+v replayed", replay, first)
	}
	if r := post("a1", order("other"), "k1"); r.status != 422 || r.typ != idem.TypeKeyReused {
		t.Fatalf("another body: %+v", r)
	}
	runs(1)

	// Another account's same key and body is another key.
	if r := post("a2", order("c"), "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" || r.body == first.body {
		t.Fatalf("another account: %+v", r)
	}
	runs(2)

	// An error releases the key: a 500, then the retry runs.
	svc.failNext.Store(true)
	if r := post("a1", order("c"), "k2"); r.status != 500 || r.typ != idem.TypeInternal {
		t.Fatalf("failing handler: %+v", r)
	}
	if r := post("a1", order("c"), "k2"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("retry after the failure: %+v", r)
	}
	runs(4)

	// While the first runs, a duplicate gets 409 with Retry-After, at once.
	done := make(chan reply)
	go func() { r, _ := send("a1", order("slow"), "k3"); done <- r }()
	<-svc.entered
	if r := post("a1", order("slow"), "k3"); r.status != 409 || r.typ != idem.TypeKeyInUse || r.header.Get("Retry-After") == "" {
		t.Fatalf("duplicate while running: %+v", r)
	}
	close(svc.release)
	if r := <-done; r.status != 201 {
		t.Fatalf("the slow first: %+v", r)
	}
	runs(5)

	// 50 at once with one key: one run, and every answer its 201 or a 409.
	var wg sync.WaitGroup
	replies := make([]reply, 50)
	start := make(chan struct{})
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], _ = send("a1", order("race"), "k4")
		}()
	}
	close(start)
	wg.Wait()
	var created string
	for _, r := range replies {
		switch {
		case r.status == 201 && (created == "" || r.body == created):
			created = r.body
		case r.status == 409:
		default:
			t.Fatalf("race answer %+v", r)
		}
	}
	runs(6)
}
`
