package server_test

// Benchmarks of the generated handler over the in-memory store: what the
// generated middleware path (routing, decoding, the Idempotency-Key
// protocol, encoding) costs per request, allocations included, without a
// network or a database. They need no PostgreSQL. go run ./bench runs
// them: go test -run '^$' -bench GeneratedHandler -benchmem ./example/server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oapi-codegen/runtime"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

var (
	benchOrderJSON   = []byte(`{"amount_cents":1250,"currency":"EUR","customer_id":"cus_bench"}`)
	benchPaymentJSON = []byte(`{"order_id":"ord_bench","amount_cents":1250}`)
	benchCreated     = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
)

// benchService is a trivial in-memory implementation of the example API:
// the same business steps as package orders, on maps.
type benchService struct {
	mu       sync.Mutex
	next     int64
	orders   map[string]gen.Order
	payments map[string]gen.Payment // by the request's derived key
}

var _ gen.IdempotentServer[memstore.NoTx] = (*benchService)(nil)

func newBenchService() *benchService {
	return &benchService{orders: map[string]gen.Order{}, payments: map[string]gen.Payment{}}
}

func (s *benchService) insertOrder(account string, b *gen.NewOrder) gen.Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	o := gen.Order{Id: "ord_" + strconv.FormatInt(s.next, 10), AccountId: account, AmountCents: b.AmountCents, Currency: b.Currency, CustomerId: b.CustomerId, CreatedAt: benchCreated}
	s.orders[o.Id] = o
	return o
}

func (s *benchService) CreateOrder(_ context.Context, _ *idem.Attempt[memstore.NoTx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	o := s.insertOrder(req.Params.XAccountId, req.Body)
	return gen.CreateOrder201JSONResponse{Body: o, Headers: gen.CreateOrder201ResponseHeaders{Location: "/orders/" + o.Id}}, nil
}

func (s *benchService) CreateOrderBaseline(_ context.Context, req gen.CreateOrderBaselineRequestObject) (gen.CreateOrderBaselineResponseObject, error) {
	o := s.insertOrder(req.Params.XAccountId, req.Body)
	return gen.CreateOrderBaseline201JSONResponse{Body: o, Headers: gen.CreateOrderBaseline201ResponseHeaders{Location: "/orders/" + o.Id}}, nil
}

func (s *benchService) CreateExport(context.Context, *idem.Attempt[memstore.NoTx], gen.CreateExportRequestObject) (gen.CreateExportResponseObject, error) {
	return gen.CreateExport201JSONResponse{Id: "exp_bench", Csv: "id\n"}, nil
}

func (s *benchService) GetOrder(_ context.Context, req gen.GetOrderRequestObject) (gen.GetOrderResponseObject, error) {
	s.mu.Lock()
	o, ok := s.orders[req.Id]
	s.mu.Unlock()
	if !ok || o.AccountId != req.Params.XAccountId {
		return gen.GetOrder404ApplicationProblemPlusJSONResponse{Type: "https://example.com/problems/not-found", Title: "Order not found", Status: http.StatusNotFound}, nil
	}
	return gen.GetOrder200JSONResponse(o), nil
}

func (s *benchService) ListOrders(_ context.Context, req gen.ListOrdersRequestObject) (gen.ListOrdersResponseObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := []gen.Order{}
	for _, o := range s.orders {
		if o.AccountId == req.Params.XAccountId && o.CustomerId == req.Params.CustomerId {
			list = append(list, o)
		}
	}
	return gen.ListOrders200JSONResponse{Orders: list}, nil
}

// The three phases of createPayment, as package orders has them, with the
// payment provider's charge made up in place.

func (s *benchService) CreatePayment(_ context.Context, at *idem.Attempt[memstore.NoTx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.payments[at.DerivedKey("payment")] = gen.Payment{Id: "pay_" + strconv.FormatInt(s.next, 10), OrderId: req.Body.OrderId, AmountCents: req.Body.AmountCents, Status: "pending"}
	return gen.CreatePaymentNext(gen.CreatePaymentPaymentCreated), nil
}

func (s *benchService) CreatePaymentAfterPaymentCreated(_ context.Context, at *idem.Attempt[memstore.NoTx], _ gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := at.DerivedKey("payment")
	p, ok := s.payments[ref]
	if !ok {
		return gen.CreatePaymentStep{}, errors.New("the payment recorded at payment_created is missing")
	}
	p.ChargeId, p.Status = "ch_"+p.Id, "succeeded"
	s.payments[ref] = p
	return gen.CreatePaymentNext(gen.CreatePaymentChargeCreated), nil
}

func (s *benchService) CreatePaymentAfterChargeCreated(_ context.Context, at *idem.Attempt[memstore.NoTx], _ gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	s.mu.Lock()
	p, ok := s.payments[at.DerivedKey("payment")]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("the payment recorded at payment_created is missing")
	}
	return gen.CreatePayment201JSONResponse{Body: p, Headers: gen.CreatePayment201ResponseHeaders{Location: "/payments/" + p.Id}}, nil
}

// ImportOrders answers with the purchase order's number; the bench sends
// none.
func (s *benchService) ImportOrders(_ context.Context, _ *idem.Attempt[memstore.NoTx], req gen.ImportOrdersRequestObject) (gen.ImportOrdersResponseObject, error) {
	return gen.ImportOrders201JSONResponse{PoNumber: req.Body.PoNumber, Orders: []gen.Order{}}, nil
}

// ReceivePaymentEvent acknowledges every event; the bench sends none.
func (s *benchService) ReceivePaymentEvent(_ context.Context, _ *idem.Attempt[memstore.NoTx], req gen.ReceivePaymentEventRequestObject) (gen.ReceivePaymentEventResponseObject, error) {
	return gen.ReceivePaymentEvent200JSONResponse{Type: req.Body.Type}, nil
}

// benchBody is a request body that can be rewound, so that one request
// serves every iteration without allocating.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchWriter is a ResponseWriter that keeps the status and drops the
// body, reused across iterations.
type benchWriter struct {
	header http.Header
	status int
}

func (w *benchWriter) Header() http.Header { return w.header }
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
func (w *benchWriter) WriteHeader(status int) { w.status = status }

// benchHarness sends one kind of request to a generated handler. It
// reuses the request and the writer, so that what allocates per
// iteration is the handler's path, not the harness.
type benchHarness struct {
	handler http.Handler
	req     *http.Request
	payload []byte
	body    benchBody
	w       benchWriter
}

func newBenchHarness(path string, payload []byte) *benchHarness {
	handler := gen.NewIdempotentHandler(newBenchService(), memstore.New(memstore.Options{}), gen.IdempotentHandlerOptions{
		Options: idem.Options{Logger: slog.New(slog.DiscardHandler)},
	})
	req := httptest.NewRequest(http.MethodPost, path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account-Id", "acct_bench")
	return &benchHarness{handler: handler, req: req, payload: payload, w: benchWriter{header: http.Header{}}}
}

// serve sends the request with key, a one-element header value, or none
// when nil, and returns the writer with the answer.
func (h *benchHarness) serve(key []string) *benchWriter {
	h.body.Reset(h.payload)
	h.req.Body = &h.body
	h.req.ContentLength = int64(len(h.payload))
	if key != nil {
		h.req.Header[idem.HeaderKey] = key
	}
	clear(h.w.header)
	h.w.status = 0
	h.handler.ServeHTTP(&h.w, h.req)
	return &h.w
}

// benchKeys makes n distinct Idempotency-Key header values beforehand.
func benchKeys(prefix string, n int) [][]string {
	keys := make([][]string, n)
	for i := range keys {
		keys[i] = []string{prefix + strconv.Itoa(i)}
	}
	return keys
}

// benchCases are the requests measured: path, body, and the keys of b.N
// requests (nil: no key).
var benchCases = []struct {
	name    string
	path    string
	payload []byte
	keys    func(n int) [][]string
	// replayed is true when every measured request replays.
	replayed bool
}{
	{name: "baseline", path: "/baseline/orders", payload: benchOrderJSON, keys: func(n int) [][]string { return make([][]string, n) }},
	{name: "first", path: "/orders", payload: benchOrderJSON, keys: func(n int) [][]string { return benchKeys("first-", n) }},
	{name: "replay", path: "/orders", payload: benchOrderJSON, replayed: true, keys: func(n int) [][]string {
		keys := make([][]string, n)
		for i := range keys {
			keys[i] = []string{"replayed"}
		}
		return keys
	}},
	{name: "phased-first", path: "/payments", payload: benchPaymentJSON, keys: func(n int) [][]string { return benchKeys("phased-", n) }},
}

// BenchmarkGeneratedHandler measures each case through
// gen.NewIdempotentHandler over memstore. The baseline is the unannotated
// twin of createOrder: the other cases' difference to it is the
// idempotency layer's cost.
func BenchmarkGeneratedHandler(b *testing.B) {
	for _, tc := range benchCases {
		b.Run(tc.name, func(b *testing.B) {
			h := newBenchHarness(tc.path, tc.payload)
			if tc.replayed {
				h.serve([]string{"replayed"}) // the first execution, not measured
			}
			keys := tc.keys(b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if w := h.serve(keys[i]); w.status != http.StatusCreated {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
	// The part of a replay that deciding it before the body is decoded
	// could save at most: the strict handler's decode of the same body.
	b.Run("replay/decode", func(b *testing.B) {
		var body benchBody
		req := httptest.NewRequest(http.MethodPost, "/orders", &body)
		req.Header.Set("Content-Type", "application/json")
		b.ReportAllocs()
		for b.Loop() {
			body.Reset(benchOrderJSON)
			var order gen.CreateOrderJSONRequestBody
			if err := runtime.BindJSONBody(req, &order); err != nil || order.CustomerId == "" {
				b.Fatalf("decoded %+v, %v", order, err)
			}
		}
	})
}

// TestGeneratedHandlerBenchCases checks that each benchmark case answers
// what it is meant to measure, in plain go test.
func TestGeneratedHandlerBenchCases(t *testing.T) {
	for _, tc := range benchCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newBenchHarness(tc.path, tc.payload)
			if tc.replayed {
				h.serve([]string{"replayed"})
			}
			for i, key := range tc.keys(3) {
				w := h.serve(key)
				replayed := w.header.Get(idem.HeaderReplayed) == "true"
				if w.status != http.StatusCreated || replayed != tc.replayed || w.header.Get("Location") == "" {
					t.Fatalf("request %d: status %d, replayed %v, headers %v; want 201, replayed %v, a Location", i, w.status, replayed, w.header, tc.replayed)
				}
			}
		})
	}
}
