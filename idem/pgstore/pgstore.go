// Package pgstore is the PostgreSQL key store, on pgx/v5 and the
// sqlc-generated queries of queries/idempotency_keys.sql.
//
// A replay, 409 or 422 costs one read-only statement. A first execution
// claims the key inside the transaction that the handler's writes and the
// stored response commit in, so it commits once and a crash leaves no
// claim behind. Concurrent duplicates see the uncommitted claim through a
// transaction-scoped advisory lock and get their 409 at once, without
// waiting for the first attempt's transaction.
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// DB is what the store needs of a connection pool; *pgxpool.Pool and
// *pgx.Conn satisfy it.
type DB interface {
	dbsqlc.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is the PostgreSQL key store. Its attempts hand handlers a pgx.Tx.
type Store struct {
	db DB
	q  *dbsqlc.Queries
}

var _ idem.Store[pgx.Tx] = (*Store)(nil)

// New returns a store on db. The table must exist: see Migrate.
func New(db DB) *Store {
	return &Store{db: db, q: dbsqlc.New(db)}
}

// lockID maps a key to the advisory lock that guards its claim. Two keys
// that share a lock ID only make each other look busy while both run.
func lockID(id idem.ID) int64 {
	h := sha256.New()
	for _, s := range []string{id.Scope, id.Operation, id.Key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// Lookup reads a key with one read-only statement.
func (s *Store) Lookup(ctx context.Context, id idem.ID) (idem.Record, error) {
	row, err := s.q.LookupKey(ctx, dbsqlc.LookupKeyParams{
		LockID: lockID(id), Scope: id.Scope, Operation: id.Operation, Key: id.Key,
	})
	if err != nil {
		return idem.Record{}, fmt.Errorf("pgstore: lookup key: %w", err)
	}
	live := row.Status.Valid && !row.Expired
	switch {
	case !live && row.Idle:
		return idem.Record{State: idem.Absent}, nil
	case !live:
		return idem.Record{State: idem.Busy}, nil
	case row.Status.String == "completed":
		var h http.Header
		if err := json.Unmarshal(row.ResponseHeaders, &h); err != nil {
			return idem.Record{}, fmt.Errorf("pgstore: stored response headers: %w", err)
		}
		return idem.Record{
			State:       idem.Completed,
			Fingerprint: row.Fingerprint,
			Response:    &idem.Response{Status: int(row.ResponseStatus.Int32), Header: h, Body: row.ResponseBody},
		}, nil
	case row.LeaseExpired && row.Idle:
		return idem.Record{State: idem.Abandoned, Fingerprint: row.Fingerprint, RecoveryPoint: row.RecoveryPoint.String}, nil
	default:
		return idem.Record{State: idem.Busy, Fingerprint: row.Fingerprint, RecoveryPoint: row.RecoveryPoint.String}, nil
	}
}

// Claim begins the attempt's transaction and claims the key in it.
func (s *Store) Claim(ctx context.Context, id idem.ID, c idem.Claim) (idem.Txn[pgx.Tx], error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	q := s.q.WithTx(tx)
	row, err := q.ClaimKey(ctx, dbsqlc.ClaimKeyParams{
		LockID:      lockID(id),
		Scope:       id.Scope,
		Operation:   id.Operation,
		Key:         id.Key,
		Fingerprint: c.Fingerprint,
		LeaseMs:     c.Lease.Milliseconds(),
		TtlMs:       c.TTL.Milliseconds(),
	})
	if err == nil && (!row.Got || !row.RecoveryPoint.Valid) {
		err = idem.ErrContended
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if errors.Is(err, idem.ErrContended) {
			return nil, err
		}
		return nil, fmt.Errorf("pgstore: claim key: %w", err)
	}
	return &txn{tx: tx, q: q, id: id, claimed: true}, nil
}

// Begin starts a transaction for an attempt without a key.
func (s *Store) Begin(ctx context.Context) (idem.Txn[pgx.Tx], error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &txn{tx: tx, q: s.q.WithTx(tx)}, nil
}

type txn struct {
	tx      pgx.Tx
	q       *dbsqlc.Queries
	id      idem.ID
	claimed bool
}

func (t *txn) Tx() pgx.Tx { return ownedTx{t.tx} }

// Complete stores the response and commits it with the handler's writes.
func (t *txn) Complete(ctx context.Context, r *idem.Response) error {
	if t.claimed {
		headers, err := json.Marshal(r.Header)
		if err != nil {
			_ = t.tx.Rollback(ctx)
			return fmt.Errorf("pgstore: encode response headers: %w", err)
		}
		n, err := t.q.CompleteKey(ctx, dbsqlc.CompleteKeyParams{
			ResponseStatus:  pgtype.Int4{Int32: int32(r.Status), Valid: true},
			ResponseHeaders: headers,
			ResponseBody:    r.Body,
			Scope:           t.id.Scope,
			Operation:       t.id.Operation,
			Key:             t.id.Key,
		})
		if err == nil && n != 1 {
			err = errors.New("the claim is gone")
		}
		if err != nil {
			_ = t.tx.Rollback(ctx)
			return fmt.Errorf("pgstore: store response: %w", err)
		}
	}
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit attempt: %w", err)
	}
	return nil
}

// Abort rolls the attempt back, claim and writes together.
func (t *txn) Abort(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: roll back attempt: %w", err)
	}
	return nil
}

// ErrOwnedTx is returned when a handler commits or rolls back the
// attempt's transaction: the engine ends it, with the stored response.
var ErrOwnedTx = errors.New("pgstore: the attempt's transaction is committed by the idempotency layer with the response; return a response or an error instead")

// ownedTx is the attempt's transaction as the handler sees it: everything
// but ending it. Savepoints (Begin) work as usual.
type ownedTx struct{ pgx.Tx }

func (ownedTx) Commit(context.Context) error   { return ErrOwnedTx }
func (ownedTx) Rollback(context.Context) error { return ErrOwnedTx }
