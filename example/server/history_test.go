package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

func (s *historyService) GetOrder(context.Context, gen.GetOrderRequestObject) (gen.GetOrderResponseObject, error) {
	return nil, errNotServed
}

// TestHistoryOverHTTP runs the history checker over HTTP against the
// example's generated handler on PostgreSQL, mounted as the example
// mounts it: the scope in the X-Account-Id header parameter, bodies
// decoded and fingerprinted by the generated code.
func TestHistoryOverHTTP(t *testing.T) {
	seed := rand.Uint64()
	cfg := history.Config{Seed: seed, Lease: 5 * time.Second} // createPayment's lease in openapi.yaml
	hist := history.New(cfg)
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (scope text, operation text, key text, generation bigint, phase text, token text)`); err != nil {
		t.Fatal(err)
	}
	svc := &historyService{}
	srv := httptest.NewServer(server.Handler(svc, pool, hist.Logger()))
	t.Cleanup(srv.Close)
	h := pgHistoryHarness(t, pool)
	h.Points = []string{string(gen.CreatePaymentPaymentCreated), string(gen.CreatePaymentChargeCreated)}
	var ids atomic.Int64
	h.Send = func(ctx context.Context, req history.Request, handle history.Handle[pgx.Tx]) history.Answer {
		id := fmt.Sprint(ids.Add(1))
		svc.handles.Store(id, handle)
		defer svc.handles.Delete(id)
		path, body := "/orders", fmt.Sprintf(`{"amount_cents": %d, "currency": "EUR", "customer_id": "cus_1"}`, 1000+req.Variant)
		if req.Phased {
			path, body = "/payments", fmt.Sprintf(`{"order_id": "ord_1", "amount_cents": %d}`, 100+req.Variant)
		}
		r, err := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Account-Id", req.ID.Scope)
		r.Header.Set(idem.HeaderKey, req.ID.Key)
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
		var sent struct{ Id string }
		if a.Status == http.StatusCreated && json.Unmarshal(b, &sent) == nil {
			a.Token = sent.Id
		}
		return a
	}
	history.RunOn(t, hist, h)
	t.Log(hist.Summary())
	for _, bad := range hist.Check() {
		t.Error(bad)
	}
	if t.Failed() {
		t.Errorf("seed %d", seed)
	}
}

// pgHistoryHarness is the checker's view of the Postgres store on pool:
// effects written in the attempts' transactions, keys aged in the table.
func pgHistoryHarness(t *testing.T, pool *pgxpool.Pool) history.Harness[pgx.Tx] {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	store := pgstore.New(pool, pgstore.Options{})
	age := func(column string) func(testing.TB, idem.ID) {
		sql := `UPDATE idempotency_keys SET ` + column + ` = now() - interval '1 second'
			WHERE (scope, operation, key) IN (SELECT scope, operation, key FROM idempotency_keys
				WHERE scope = $1 AND operation = $2 AND key = $3 FOR UPDATE SKIP LOCKED)`
		return func(t testing.TB, id idem.ID) {
			if _, err := pool.Exec(ctx, sql, id.Scope, id.Operation, id.Key); err != nil {
				t.Errorf("age %s of %v: %v", column, id, err)
			}
		}
	}
	return history.Harness[pgx.Tx]{
		Store:         store,
		Transactional: true,
		Effect: func(ctx context.Context, at *idem.Attempt[pgx.Tx], e history.Effect) error {
			_, err := at.Tx().Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3, $4, $5, $6)`, e.Scope, e.Operation, e.Key, e.Generation, e.Phase, e.Token)
			return err
		},
		Committed: func(t testing.TB) []history.Effect {
			rows, err := pool.Query(ctx, `SELECT scope, operation, key, generation, phase, token FROM effects`)
			if err != nil {
				t.Fatal(err)
			}
			effects, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.Effect, error) {
				var e history.Effect
				err := row.Scan(&e.Scope, &e.Operation, &e.Key, &e.Generation, &e.Phase, &e.Token)
				return e, err
			})
			if err != nil {
				t.Fatal(err)
			}
			return effects
		},
		Kill: func(ctx context.Context, at *idem.Attempt[pgx.Tx]) error {
			_, err := at.Tx().Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		},
		Statement: func(ctx context.Context, at *idem.Attempt[pgx.Tx]) error {
			_, err := at.Tx().Exec(ctx, `SELECT 1 / $1::int`, 0)
			return err
		},
		Age:      age("expires_at"),
		AgeLease: age("locked_until"),
		Reap: func(t testing.TB) {
			if _, err := store.Reap(ctx, pgstore.ReapOptions{Logger: quiet}); err != nil {
				t.Errorf("reap: %v", err)
			}
		},
		Sweep: func(t testing.TB) {
			if _, err := store.Sweep(ctx, pgstore.SweepOptions{AbandonedFor: 500 * time.Millisecond, Fail: true, Logger: quiet}); err != nil {
				t.Errorf("sweep: %v", err)
			}
		},
	}
}
