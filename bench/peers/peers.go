// Package peers holds the idempotency middlewares teams write by hand, for
// the load benchmark to measure next to the generated layer: the same
// createOrder work (orders.InsertOrder), a key table of the same shape, and
// the same answers (replay, 409, 422), but each design's round trips and
// commits.
//
//   - insert-update: INSERT the key with ON CONFLICT DO NOTHING in a
//     commit of its own (no row inserted: read the key and answer a
//     replay, 409 or 422), run the work in its own transaction, then
//     UPDATE the key with the response in a third commit.
//   - upsert: the same, but the claim is INSERT ... ON CONFLICT DO UPDATE
//     SET key = excluded.key RETURNING the row, one statement that also
//     reads the row of a key seen before, and writes on every request,
//     replays included.
//
// Bench-only: neither is crash-safe (a crash between the claim and the
// update leaves the key in flight for ever), which is part of why teams
// reach for a generated layer.
package peers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
)

// Paths of the two designs' createOrder.
const (
	InsertUpdatePath = "/peer/insert-update/orders"
	UpsertPath       = "/peer/upsert/orders"
)

// schema is the peers' key table, shaped like the generated store's.
const schema = `CREATE TABLE IF NOT EXISTS peer_idempotency_keys (LIKE idempotency_keys INCLUDING ALL)`

// Mount creates the peers' key table (the key store's migrations must
// have run) and adds both designs' routes to mux.
func Mount(ctx context.Context, pool *pgxpool.Pool, mux *http.ServeMux) error {
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("peers: create the key table: %w", err)
	}
	mux.Handle("POST "+InsertUpdatePath, handler{pool: pool, upsert: false})
	mux.Handle("POST "+UpsertPath, handler{pool: pool, upsert: true})
	return nil
}

type handler struct {
	pool   *pgxpool.Pool
	upsert bool
}

// keyRow is what a claim that lost finds of the key.
type keyRow struct {
	fingerprint []byte
	status      string
	respStatus  *int32
	respHeaders []byte
	respBody    []byte
}

const claimInsert = `INSERT INTO peer_idempotency_keys (scope, operation, key, fingerprint, status, locked_until, expires_at)
VALUES ($1, 'createOrder', $2, $3, 'in_flight', now() + interval '1 minute', now() + interval '24 hours')
ON CONFLICT (scope, operation, key) DO NOTHING`

const readKey = `SELECT fingerprint, status, response_status, response_headers, response_body
FROM peer_idempotency_keys WHERE scope = $1 AND operation = 'createOrder' AND key = $2`

const claimUpsert = `INSERT INTO peer_idempotency_keys AS k (scope, operation, key, fingerprint, status, locked_until, expires_at)
VALUES ($1, 'createOrder', $2, $3, 'in_flight', now() + interval '1 minute', now() + interval '24 hours')
ON CONFLICT (scope, operation, key) DO UPDATE SET key = excluded.key
RETURNING (k.xmax = 0) AS inserted, k.fingerprint, k.status, k.response_status, k.response_headers, k.response_body`

const storeResponse = `UPDATE peer_idempotency_keys
SET status = 'completed', locked_until = NULL, response_status = $3, response_headers = $4, response_body = $5
WHERE scope = $1 AND operation = 'createOrder' AND key = $2`

const releaseKey = `DELETE FROM peer_idempotency_keys WHERE scope = $1 AND operation = 'createOrder' AND key = $2 AND status = 'in_flight'`

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	scope, key := r.Header.Get("X-Account-Id"), r.Header.Get(idem.HeaderKey)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var order gen.NewOrder
	if err == nil {
		err = json.Unmarshal(body, &order)
	}
	if err != nil || scope == "" || key == "" {
		http.Error(w, "a JSON order, X-Account-Id and Idempotency-Key are required", http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)

	// Claim.
	var found keyRow
	claimed := false
	if h.upsert {
		err = h.pool.QueryRow(ctx, claimUpsert, scope, key, sum[:]).Scan(&claimed,
			&found.fingerprint, &found.status, &found.respStatus, &found.respHeaders, &found.respBody)
	} else {
		var tag interface{ RowsAffected() int64 }
		tag, err = h.pool.Exec(ctx, claimInsert, scope, key, sum[:])
		if err == nil {
			claimed = tag.RowsAffected() == 1
		}
		if err == nil && !claimed {
			err = h.pool.QueryRow(ctx, readKey, scope, key).Scan(
				&found.fingerprint, &found.status, &found.respStatus, &found.respHeaders, &found.respBody)
		}
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		http.Error(w, "the key went away; retry", http.StatusConflict)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case !claimed:
		answer(w, sum[:], found)
		return
	}

	// The work, in its own transaction.
	var o gen.Order
	err = pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		o, err = orders.InsertOrder(ctx, tx, scope, &order)
		return err
	})
	if err != nil {
		_, _ = h.pool.Exec(context.WithoutCancel(ctx), releaseKey, scope, key)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := json.Marshal(o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	headers, _ := json.Marshal(http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/" + o.Id}})

	// The response, in a third commit.
	if _, err := h.pool.Exec(ctx, storeResponse, scope, key, int32(http.StatusCreated), headers, resp); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/"+o.Id)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(resp)
}

// answer answers a request whose key was seen before.
func answer(w http.ResponseWriter, fingerprint []byte, k keyRow) {
	switch {
	case string(k.fingerprint) != string(fingerprint):
		http.Error(w, "the key was used for another request", http.StatusUnprocessableEntity)
	case k.status != "completed" || k.respStatus == nil:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the key's first request is in flight", http.StatusConflict)
	default:
		var h http.Header
		_ = json.Unmarshal(k.respHeaders, &h)
		for name, values := range h {
			w.Header()[name] = values
		}
		w.Header().Set(idem.HeaderReplayed, "true")
		w.WriteHeader(int(*k.respStatus))
		_, _ = w.Write(k.respBody)
	}
}
