package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/gen/gentest"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemtest"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// poolWriter is the example's service with the mistake the kit must
// catch: createOrder reads through its attempt's transaction but inserts
// its order through the pool, so the order survives a failed attempt and
// the retry inserts another.
type poolWriter struct{ *orders.Service }

func (s poolWriter) CreateOrder(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	var earlier int
	if err := at.Tx().QueryRow(ctx, `SELECT count(*) FROM orders WHERE customer_id = $1`, req.Body.CustomerId).Scan(&earlier); err != nil {
		return nil, err
	}
	o, err := orders.InsertOrder(ctx, s.Pool, req.Params.XAccountId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateOrder201JSONResponse{Body: o, Headers: gen.CreateOrder201ResponseHeaders{Location: "/orders/" + o.Id}}, nil
}

// kitOptions serve the example behind its account check with the tests'
// secret, as its server does.
func kitOptions() gen.IdempotentHandlerOptions {
	return gen.IdempotentHandlerOptions{StrictMiddlewares: []gen.StrictMiddlewareFunc{server.Authenticate(testSecret)}}
}

// kitRequests are the kit's requests for the example behind its account
// check: the spec's example order (what the kit sends by default, which
// carries no token), a payment for orderID and a purchase order, each
// with the token of the account acct_demo; and the provider's event for
// paymentID. The kit places each request's key where its operation reads
// it: the Idempotency-Key header, the po_number, the webhook-id header.
func kitRequests(orderID, paymentID string) gentest.Requests {
	header := func() http.Header {
		return http.Header{"Content-Type": {"application/json"}, "X-Account-Id": {"acct_demo"}, "Authorization": {bearer("acct_demo")}}
	}
	return gentest.Requests{
		CreateOrder: &idemtest.Request{
			Method: "POST",
			Path:   "/orders",
			Header: header(),
			Body:   []byte(`{"amount_cents":1250,"currency":"EUR","customer_id":"cus_42"}`),
		},
		CreatePayment: &idemtest.Request{
			Method: "POST",
			Path:   "/payments",
			Header: header(),
			Body:   fmt.Appendf(nil, `{"order_id": %q, "amount_cents": 990}`, orderID),
		},
		ImportOrders: &idemtest.Request{
			Method: "POST",
			Path:   "/orders/imports",
			Header: header(),
			Body:   []byte(`{"po_number": "PO-1", "lines": [{"amount_cents": 500, "currency": "EUR", "customer_id": "cus_kit"}]}`),
		},
		ReceivePaymentEvent: &idemtest.Request{
			Method: "POST",
			Path:   "/webhooks/psp",
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   fmt.Appendf(nil, `{"type": "payment.succeeded", "timestamp": "2026-11-28T10:00:00Z", "data": {"payment_id": %q, "charge_id": "ch_kit"}}`, paymentID),
		},
	}
}

// kitRows adds what the kit's requests refer to: an order of acct_demo to
// pay, and a payment for the provider's event to settle.
func kitRows(t *testing.T, pool *pgxpool.Pool) (orderID, paymentID string) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `INSERT INTO orders (account_id, amount_cents, currency, customer_id)
		VALUES ('acct_demo', 990, 'EUR', 'cus_pay') RETURNING id`).Scan(&orderID)
	if err == nil {
		err = pool.QueryRow(t.Context(), `INSERT INTO payments (account_id, order_id, amount_cents, currency, reference)
			VALUES ('acct_demo', $1, 990, 'EUR', 'kit') RETURNING id`, orderID).Scan(&paymentID)
	}
	if err != nil {
		t.Fatal(err)
	}
	return orderID, paymentID
}

// kitService returns the example's service on a fresh database, and the
// requests the kit needs for it.
func kitService(t *testing.T) (*pgxpool.Pool, *orders.Service, gentest.Requests) {
	pool := idemtest.NewPool(t)
	if err := orders.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	provider := httptest.NewServer(psp.NewFake())
	t.Cleanup(provider.Close)
	return pool, &orders.Service{Pool: pool, PSP: &psp.Client{BaseURL: provider.URL}}, kitRequests(kitRows(t, pool))
}

// The kit fails a handler that writes through the pool instead of
// at.Tx(), naming the table and the mistake, and passes the example's
// own handlers, which write through at.Tx().
func TestKitCatchesWritesOutsideTheAttempt(t *testing.T) {
	t.Run("through the pool", func(t *testing.T) {
		pool, svc, reqs := kitService(t)
		ft := idemtest.NewRecorder(t)
		gentest.Check(ft, poolWriter{svc}, pgstore.New(pool, pgstore.Options{}), kitOptions(), reqs)
		failures := ft.Failures()
		if !ft.Failed() || len(failures) != 1 {
			t.Fatalf("the kit reported %d failures, want 1, from createOrder's error check: %q", len(failures), failures)
		}
		const want = "the handler wrote to table orders outside its attempt's transaction (at.Tx()); those writes survive a failed attempt and a retry repeats them"
		if f := failures[0]; !strings.HasPrefix(f, t.Name()+"/createOrder/error-releases-key: ") || !strings.Contains(f, want) {
			t.Fatalf("the kit reported %q; want createOrder's error check to say %q", f, want)
		}
	})
	t.Run("through the attempt", func(t *testing.T) {
		pool, svc, reqs := kitService(t)
		ft := idemtest.NewRecorder(t)
		gentest.Check(ft, svc, pgstore.New(pool, pgstore.Options{}), kitOptions(), reqs)
		if f := ft.Failures(); ft.Failed() || len(f) != 0 {
			t.Fatalf("the kit failed the example's own handlers: %q", f)
		}
	})
}
