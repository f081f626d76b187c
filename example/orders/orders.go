// Package orders is the example's business logic: all a team writes by
// hand. CreateOrder inserts through the attempt's transaction, so the
// order and the stored response commit together. CreatePayment runs in
// phases around a call to a payment provider (payments.go).
package orders

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

//go:embed schema.sql
var schema string

// Migrate creates the key store and the orders and payments tables, with
// pgstore's default migration options.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return MigrateWith(ctx, pool, pgstore.MigrateOptions{})
}

// MigrateWith applies the key store's migrations and River's (which runs
// createExport's requests), then creates the orders and payments tables, each step in a transaction of its own under the
// migrators' lock (so that servers starting at once on a new database all
// come up) and with a lock timeout (so that a busy table delays the
// migration, never the requests). The key store's migrations never share
// a transaction with the application's DDL: there, the key table would
// stay locked while the application's statements waited on its own
// tables, and every request would wait with them.
func MigrateWith(ctx context.Context, pool *pgxpool.Pool, opts pgstore.MigrateOptions) error {
	m, err := pgstore.NewMigrator(pool, opts)
	if err != nil {
		return fmt.Errorf("orders: migrate: %w", err)
	}
	if _, err := m.Up(ctx, 0); err != nil {
		return fmt.Errorf("orders: migrate: %w", err)
	}
	if err := idemriver.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("orders: migrate: %w", err)
	}
	if err := m.Apply(ctx, schema); err != nil {
		return fmt.Errorf("orders: migrate: %w", err)
	}
	return nil
}

// Service implements the generated server interface on PostgreSQL.
type Service struct {
	Pool *pgxpool.Pool
	// WorkDelay makes CreateOrder wait inside its attempt, holding the
	// key, to show the in-flight case.
	WorkDelay time.Duration
	// PSP is the payment provider CreatePayment charges.
	PSP *psp.Client
	// Crash, when set, is called at each of the Crash* points of
	// CreatePayment; the example server makes it end the process at one
	// of them.
	Crash func(point string)
	// Jobs, when set, is the River client CreatePayment stages a
	// SendReceipt job with, in its last phase's transaction.
	Jobs *river.Client[pgx.Tx]
}

var _ gen.IdempotentServer[pgx.Tx] = (*Service)(nil)

// ProblemInvalidOrder is the problem type of a rejected order.
const ProblemInvalidOrder = "https://example.com/problems/invalid-order"

const orderColumns = `id, account_id, amount_cents, currency, customer_id, created_at`

func (s *Service) CreateOrder(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	if p := checkOrder(req.Body); p != nil {
		// A typed response: stored and replayed like a success.
		return gen.CreateOrder400ApplicationProblemPlusJSONResponse(*p), nil
	}
	o, err := InsertOrder(ctx, at.Tx(), req.Params.XAccountId, req.Body)
	if err != nil {
		return nil, err
	}
	if s.WorkDelay > 0 {
		select {
		case <-time.After(s.WorkDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return gen.CreateOrder201JSONResponse{
		Body:    o,
		Headers: gen.CreateOrder201ResponseHeaders{Location: "/orders/" + o.Id},
	}, nil
}

// CreateOrderBaseline is CreateOrder without idempotency: the same checks
// and insert, committed on its own.
func (s *Service) CreateOrderBaseline(ctx context.Context, req gen.CreateOrderBaselineRequestObject) (gen.CreateOrderBaselineResponseObject, error) {
	if p := checkOrder(req.Body); p != nil {
		return gen.CreateOrderBaseline400ApplicationProblemPlusJSONResponse(*p), nil
	}
	o, err := InsertOrder(ctx, s.Pool, req.Params.XAccountId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateOrderBaseline201JSONResponse{
		Body:    o,
		Headers: gen.CreateOrderBaseline201ResponseHeaders{Location: "/orders/" + o.Id},
	}, nil
}

// checkOrder returns the problem with an order, or nil.
func checkOrder(b *gen.NewOrder) *gen.Problem {
	if b.AmountCents > 0 {
		return nil
	}
	return &gen.Problem{
		Type:   ProblemInvalidOrder,
		Title:  "Invalid order",
		Status: http.StatusBadRequest,
		Detail: ptr(fmt.Sprintf("amount_cents must be positive, got %d; send a new request with a new Idempotency-Key", b.AmountCents)),
	}
}

// InsertOrder inserts an order through db: the attempt's transaction, or
// the pool. It is createOrder's whole business work, exported for the
// benchmark's hand-written idempotency designs (bench/peers), which run
// the same work.
func InsertOrder(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, account string, b *gen.NewOrder) (gen.Order, error) {
	o, err := scanOrder(db.QueryRow(ctx,
		`INSERT INTO orders (account_id, amount_cents, currency, customer_id) VALUES ($1, $2, $3, $4) RETURNING `+orderColumns,
		account, b.AmountCents, b.Currency, b.CustomerId))
	if err != nil {
		return o, fmt.Errorf("insert order: %w", err)
	}
	return o, nil
}

func (s *Service) GetOrder(ctx context.Context, req gen.GetOrderRequestObject) (gen.GetOrderResponseObject, error) {
	o, err := scanOrder(s.Pool.QueryRow(ctx,
		`SELECT `+orderColumns+` FROM orders WHERE id = $1 AND account_id = $2`, req.Id, req.Params.XAccountId))
	if errors.Is(err, pgx.ErrNoRows) {
		return gen.GetOrder404ApplicationProblemPlusJSONResponse{
			Type:   "https://example.com/problems/not-found",
			Title:  "Order not found",
			Status: http.StatusNotFound,
			Detail: ptr("no order " + req.Id + " in this account; check the id and the X-Account-Id header"),
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get order: %w", err)
	}
	return gen.GetOrder200JSONResponse(o), nil
}

func (s *Service) ListOrders(ctx context.Context, req gen.ListOrdersRequestObject) (gen.ListOrdersResponseObject, error) {
	rows, err := s.Pool.Query(ctx,
		`SELECT `+orderColumns+` FROM orders WHERE account_id = $1 AND customer_id = $2 ORDER BY created_at, id`,
		req.Params.XAccountId, req.Params.CustomerId)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (gen.Order, error) { return scanOrder(r) })
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	if list == nil {
		list = []gen.Order{}
	}
	return gen.ListOrders200JSONResponse{Orders: list}, nil
}

func scanOrder(row pgx.Row) (gen.Order, error) {
	var o gen.Order
	err := row.Scan(&o.Id, &o.AccountId, &o.AmountCents, &o.Currency, &o.CustomerId, &o.CreatedAt)
	o.CreatedAt = o.CreatedAt.UTC()
	return o, err
}

func ptr[T any](v T) *T { return &v }
