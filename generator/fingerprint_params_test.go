package generator_test

import "testing"

// TestHeaderParamsInFingerprint runs the orders test spec's generated
// handler over HTTP: createOrder declares X-Request-Id, which counts in the
// fingerprint, and X-Trace-Id, which fingerprint.exclude leaves out. With
// the zero-value options (one scope for all), a caller that changes the
// declared header under a key gets a 422, never the other's response.
func TestHeaderParamsInFingerprint(t *testing.T) {
	t.Parallel()
	runGenerated(t, "orders", headerParamsTest)
}

const headerParamsTest = `package orders

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type service struct{ runs int }

func (s *service) CreateOrder(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateOrderRequestObject) (CreateOrderResponseObject, error) {
	s.runs++
	return CreateOrder201JSONResponse{
		Body:    Order{Id: "ord_" + *request.Params.XRequestId, AmountCents: request.Body.AmountCents, Currency: request.Body.Currency, CustomerId: request.Body.CustomerId, CreatedAt: time.Unix(0, 0).UTC()},
		Headers: CreateOrder201ResponseHeaders{Location: "/orders/1"},
	}, nil
}

func (s *service) ListOrders(context.Context, ListOrdersRequestObject) (ListOrdersResponseObject, error) {
	return ListOrders200JSONResponse{}, nil
}

func (s *service) GetOrder(context.Context, GetOrderRequestObject) (GetOrderResponseObject, error) {
	return GetOrder404ApplicationProblemPlusJSONResponse{}, nil
}

func (s *service) CancelOrder(context.Context, *idem.Attempt[memstore.NoTx], CancelOrderRequestObject) (CancelOrderResponseObject, error) {
	return CancelOrder204Response{}, nil
}

func TestHeaderParams(t *testing.T) {
	svc := &service{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(requestID, traceID string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/accounts/a1/orders?channel=web", strings.NewReader(` + "`" + `{"amount_cents": 5, "currency": "EUR", "customer_id": "c1"}` + "`" + `))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		req.Header.Set("X-Request-Id", requestID)
		req.Header.Set("X-Trace-Id", traceID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed)
	}
	if status, _ := send("r1", "t1"); status != 201 {
		t.Fatalf("first: %d", status)
	}
	if status, replayed := send("r1", "t2"); status != 201 || replayed != "true" {
		t.Fatalf("another trace id, an excluded header: %d replayed=%q, want a replay", status, replayed)
	}
	if status, _ := send("r2", "t1"); status != 422 {
		t.Fatalf("another X-Request-Id, a declared header: %d, want 422", status)
	}
	if svc.runs != 1 {
		t.Fatalf("createOrder ran %d times, want 1", svc.runs)
	}
}
`
