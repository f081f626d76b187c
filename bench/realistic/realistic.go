// Package realistic is the load benchmark's realistic endpoint: an order
// whose business work is four statements (read the customer, insert the
// order, insert its line items, insert an outbox event), served with the
// generated Idempotency-Key layer (POST /realistic/orders) and without it
// (POST /realistic/baseline/orders), to show what the layer costs an
// endpoint that does more than one insert.
package realistic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/bench/realistic/gen"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// Customer is the customer every benchmark order is for, in Account.
const (
	Customer = "cus_realistic"
	Account  = "acct_bench"
)

const schema = `
CREATE TABLE IF NOT EXISTS realistic_customers (
    id         text PRIMARY KEY,
    account_id text NOT NULL,
    name       text NOT NULL
);
CREATE TABLE IF NOT EXISTS realistic_orders (
    id          text        PRIMARY KEY DEFAULT 'ord_' || replace(gen_random_uuid()::text, '-', ''),
    account_id  text        NOT NULL,
    customer_id text        NOT NULL REFERENCES realistic_customers (id),
    total_cents bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS realistic_line_items (
    order_id    text    NOT NULL REFERENCES realistic_orders (id),
    sku         text    NOT NULL,
    quantity    integer NOT NULL,
    price_cents bigint  NOT NULL
);
CREATE INDEX IF NOT EXISTS realistic_line_items_order_idx ON realistic_line_items (order_id);
CREATE TABLE IF NOT EXISTS realistic_outbox (
    id         bigserial   PRIMARY KEY,
    topic      text        NOT NULL,
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO realistic_customers (id, account_id, name) VALUES ('` + Customer + `', '` + Account + `', 'Bench Customer')
ON CONFLICT (id) DO NOTHING;`

// Mount creates the endpoint's tables and its customer and adds both
// routes to mux, the annotated one on the Postgres key store.
func Mount(ctx context.Context, pool *pgxpool.Pool, mux *http.ServeMux, log *slog.Logger) error {
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("realistic: create tables: %w", err)
	}
	gen.NewIdempotentHandler(service{pool}, pgstore.New(pool, pgstore.Options{}), gen.IdempotentHandlerOptions{
		Options:    idem.Options{Logger: log},
		BaseRouter: mux,
	})
	return nil
}

type service struct{ pool *pgxpool.Pool }

var _ gen.IdempotentServer[pgx.Tx] = service{}

func (s service) CreateRealisticOrder(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateRealisticOrderRequestObject) (gen.CreateRealisticOrderResponseObject, error) {
	o, err := placeOrder(ctx, at.Tx(), req.Params.XAccountId, req.Body)
	if errors.Is(err, errNoCustomer) {
		return gen.CreateRealisticOrder404ApplicationProblemPlusJSONResponse(noCustomer(req.Body.CustomerId)), nil
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateRealisticOrder201JSONResponse(o), nil
}

func (s service) CreateRealisticOrderBaseline(ctx context.Context, req gen.CreateRealisticOrderBaselineRequestObject) (gen.CreateRealisticOrderBaselineResponseObject, error) {
	var o gen.Order
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		o, err = placeOrder(ctx, tx, req.Params.XAccountId, req.Body)
		return err
	})
	if errors.Is(err, errNoCustomer) {
		return gen.CreateRealisticOrderBaseline404ApplicationProblemPlusJSONResponse(noCustomer(req.Body.CustomerId)), nil
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateRealisticOrderBaseline201JSONResponse(o), nil
}

var errNoCustomer = errors.New("realistic: no such customer")

func noCustomer(id string) gen.Problem {
	detail := fmt.Sprintf("customer %s is not the account's", id)
	return gen.Problem{Type: "about:blank", Title: "Unknown customer", Status: http.StatusNotFound, Detail: &detail}
}

// placeOrder is the endpoint's business work, in tx: four statements.
func placeOrder(ctx context.Context, tx pgx.Tx, account string, b *gen.NewOrder) (gen.Order, error) {
	var name string
	err := tx.QueryRow(ctx, `SELECT name FROM realistic_customers WHERE id = $1 AND account_id = $2`, b.CustomerId, account).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return gen.Order{}, errNoCustomer
	}
	if err != nil {
		return gen.Order{}, err
	}
	var total int64
	skus, quantities, prices := make([]string, len(b.Items)), make([]int32, len(b.Items)), make([]int64, len(b.Items))
	for i, it := range b.Items {
		total += int64(it.Quantity) * it.PriceCents
		skus[i], quantities[i], prices[i] = it.Sku, it.Quantity, it.PriceCents
	}
	o := gen.Order{CustomerId: b.CustomerId, TotalCents: total}
	if err := tx.QueryRow(ctx, `INSERT INTO realistic_orders (account_id, customer_id, total_cents) VALUES ($1, $2, $3) RETURNING id`,
		account, b.CustomerId, total).Scan(&o.Id); err != nil {
		return o, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO realistic_line_items (order_id, sku, quantity, price_cents)
		SELECT $1, * FROM unnest($2::text[], $3::integer[], $4::bigint[])`, o.Id, skus, quantities, prices); err != nil {
		return o, err
	}
	payload, err := json.Marshal(o)
	if err != nil {
		return o, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO realistic_outbox (topic, payload) VALUES ('order.created', $1)`, payload); err != nil {
		return o, err
	}
	return o, nil
}
