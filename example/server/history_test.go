package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/history"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// historyService serves the example's annotated operations by running the
// history checker's handler for each request, found by the header
// historyRequest.
type historyService struct {
	handles sync.Map // request id -> history.Handle[pgx.Tx]
}

const historyRequest = "X-History-Request"

var errNotServed = errors.New("not served in the history test")

func (s *historyService) handle(ctx context.Context) history.Handle[pgx.Tx] {
	h, _ := s.handles.Load(idem.RequestFrom(ctx).Header.Get(historyRequest))
	return h.(history.Handle[pgx.Tx])
}

func (s *historyService) CreateOrder(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	token, err := s.handle(ctx)(ctx, at)
	if err != nil {
		return nil, err
	}
	return gen.CreateOrder201JSONResponse{Body: gen.Order{Id: token, AccountId: req.Params.XAccountId, AmountCents: req.Body.AmountCents}, Headers: gen.CreateOrder201ResponseHeaders{Location: "/orders/" + token}}, nil
}

func (s *historyService) phase(ctx context.Context, at *idem.Attempt[pgx.Tx], next gen.CreatePaymentPoint) (gen.CreatePaymentStep, error) {
	if _, err := s.handle(ctx)(ctx, at); err != nil {
		return gen.CreatePaymentStep{}, err
	}
	return gen.CreatePaymentNext(next), nil
}

func (s *historyService) CreatePayment(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	return s.phase(ctx, at, gen.CreatePaymentPaymentCreated)
}

func (s *historyService) CreatePaymentAfterPaymentCreated(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentStep, error) {
	return s.phase(ctx, at, gen.CreatePaymentChargeCreated)
}

func (s *historyService) CreatePaymentAfterChargeCreated(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	token, err := s.handle(ctx)(ctx, at)
	if err != nil {
		return nil, err
	}
	return gen.CreatePayment201JSONResponse{Body: gen.Payment{Id: token, OrderId: req.Body.OrderId, AmountCents: req.Body.AmountCents}, Headers: gen.CreatePayment201ResponseHeaders{Location: "/payments/" + token}}, nil
}

func (s *historyService) CreateOrderBaseline(context.Context, gen.CreateOrderBaselineRequestObject) (gen.CreateOrderBaselineResponseObject, error) {
	return nil, errNotServed
}

func (s *historyService) ListOrders(context.Context, gen.ListOrdersRequestObject) (gen.ListOrdersResponseObject, error) {
	return nil, errNotServed
}

func (s *historyService) CreateExport(context.Context, *idem.Attempt[pgx.Tx], gen.CreateExportRequestObject) (gen.CreateExportResponseObject, error) {
	return nil, errNotServed
}

func (s *historyService) GetOrder(context.Context, gen.GetOrderRequestObject) (gen.GetOrderResponseObject, error) {
	return nil, errNotServed
}

// ImportOrders carries its token as the purchase order's number.
func (s *historyService) ImportOrders(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.ImportOrdersRequestObject) (gen.ImportOrdersResponseObject, error) {
	token, err := s.handle(ctx)(ctx, at)
	if err != nil {
		return nil, err
	}
	return gen.ImportOrders201JSONResponse{PoNumber: token, Orders: []gen.Order{}}, nil
}

func (s *historyService) ReceivePaymentEvent(context.Context, *idem.Attempt[pgx.Tx], gen.ReceivePaymentEventRequestObject) (gen.ReceivePaymentEventResponseObject, error) {
	return nil, errNotServed
}

// TestHistoryOverHTTP runs the history checker over HTTP against the
// example's generated handler on PostgreSQL, mounted as the example
// mounts it: the scope in the X-Account-Id header parameter, bodies
// decoded and fingerprinted by the generated code.
func TestHistoryOverHTTP(t *testing.T) {
	historyOverHTTP(t, false)
}

// TestHistoryKeyInBody is TestHistoryOverHTTP with the atomic requests
// sent to importOrders, whose key is its body's po_number: the key read
// from the typed request, under the same faults. Each carries an
// Idempotency-Key of its own, which must not count.
func TestHistoryKeyInBody(t *testing.T) {
	historyOverHTTP(t, true)
}

func historyOverHTTP(t *testing.T, keyInBody bool) {
	cfg, err := history.FromEnv(0, false)
	if err != nil {
		t.Fatal(err)
	}
	// createPayment's lease in openapi.yaml; no phases that take 0.4 of it.
	cfg.Lease, cfg.Slow = 5*time.Second, false
	hist := history.New(cfg)
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	svc := &historyService{}
	srv := httptest.NewServer(server.Handler(svc, pool, hist.Logger(), testSecret))
	t.Cleanup(srv.Close)
	h := history.Postgres(t, pool, history.PostgresOptions{})
	h.Points = []string{string(gen.CreatePaymentPaymentCreated), string(gen.CreatePaymentChargeCreated)}
	if keyInBody {
		h.Operations = [2]string{"importOrders", "createPayment"}
	}
	var ids atomic.Int64
	h.Send = func(ctx context.Context, req history.Request, handle history.Handle[pgx.Tx]) history.Answer {
		id := fmt.Sprint(ids.Add(1))
		svc.handles.Store(id, handle)
		defer svc.handles.Delete(id)
		path, body := "/orders", fmt.Sprintf(`{"amount_cents": %d, "currency": "EUR", "customer_id": "cus_1"}`, 1000+req.Variant)
		key := req.ID.Key
		switch {
		case req.Phased:
			path, body = "/payments", fmt.Sprintf(`{"order_id": "ord_1", "amount_cents": %d}`, 100+req.Variant)
		case keyInBody:
			path = "/orders/imports"
			body = fmt.Sprintf(`{"po_number": %q, "lines": [%s]}`, req.ID.Key, body)
			key = "ignored-" + id
		}
		r, err := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		authorize(r, req.ID.Scope)
		r.Header.Set(idem.HeaderKey, key)
		r.Header.Set(historyRequest, id)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			if ctx.Err() != nil {
				return history.Answer{Status: idem.StatusClientClosed, Problem: "client-closed-request"}
			}
			t.Errorf("%s %s: %v", r.Method, path, err)
			return history.Answer{}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Errorf("%s %s: read the answer: %v", r.Method, path, err)
		}
		a := history.Answer{Status: resp.StatusCode, Body: b, Replayed: resp.Header.Get("Idempotent-Replayed") == "true", Problem: history.ProblemName(resp.Header, b)}
		if a.Status == http.StatusInternalServerError && a.Problem == "internal-error" {
			a.Problem = "handler-error"
		}
		var sent struct {
			Id       string
			PoNumber string `json:"po_number"`
		}
		if a.Status == http.StatusCreated && json.Unmarshal(b, &sent) == nil {
			a.Token = sent.Id + sent.PoNumber
		}
		return a
	}
	history.RunOn(t, hist, h)
	t.Log(hist.Summary())
	for _, bad := range hist.Check() {
		t.Error(bad)
	}
	if t.Failed() {
		t.Errorf("seed %d: rerun with IDEMGEN_HISTORY_SEED=%d", cfg.Seed, cfg.Seed)
	}
}
