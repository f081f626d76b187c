// Package pgstore is the PostgreSQL key store, on pgx/v5 and the
// sqlc-generated queries of queries/idempotency_keys.sql.
//
// A replay, 409 or 422 costs one read-only statement. A first execution
// claims the key inside the transaction that the handler's writes and the
// stored response commit in, so it commits once and a crash leaves no
// claim behind. Concurrent duplicates see the uncommitted claim through a
// transaction-scoped advisory lock and get their 409 at once, without
// waiting for the first attempt's transaction.
//
// A phased attempt's claim commits on its own, with a lease (locked_until)
// and a fencing token (attempt); each phase's transaction starts by taking
// the advisory lock and checking the token, so an attempt whose lease was
// taken over can commit nothing more. Janitor sweeps abandoned leases and
// reaps expired keys.
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
var _ idem.Phase[pgx.Tx] = (*txn)(nil)

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
	attempt, _, err := claim(ctx, q, id, c)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	return &txn{tx: tx, q: q, id: id, attempt: attempt}, nil
}

// Lease claims the key in a statement of its own, which commits at once.
func (s *Store) Lease(ctx context.Context, id idem.ID, c idem.Claim) (idem.Lease[pgx.Tx], error) {
	attempt, point, err := claim(ctx, s.q, id, c)
	if err != nil {
		return nil, err
	}
	return &lease{s: s, id: id, attempt: attempt, point: point, lease: c.Lease}, nil
}

// claim runs ClaimKey: inside the attempt's transaction for Claim, on its
// own for Lease.
func claim(ctx context.Context, q *dbsqlc.Queries, id idem.ID, c idem.Claim) (attempt int32, point string, err error) {
	row, err := q.ClaimKey(ctx, dbsqlc.ClaimKeyParams{
		LockID:      lockID(id),
		Scope:       id.Scope,
		Operation:   id.Operation,
		Key:         id.Key,
		Fingerprint: c.Fingerprint,
		LeaseMs:     c.Lease.Milliseconds(),
		TtlMs:       c.TTL.Milliseconds(),
	})
	if err != nil {
		return 0, "", fmt.Errorf("pgstore: claim key: %w", err)
	}
	if !row.Got || !row.RecoveryPoint.Valid {
		return 0, "", idem.ErrContended
	}
	return row.Attempt.Int32, row.RecoveryPoint.String, nil
}

// Secret reads the key of derived keys that the migrations created.
func (s *Store) Secret(ctx context.Context) ([]byte, error) {
	secret, err := s.q.GetSecret(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read the derived-key secret (are the migrations applied?): %w", err)
	}
	return secret, nil
}

// Begin starts a transaction for an attempt without a key.
func (s *Store) Begin(ctx context.Context) (idem.Txn[pgx.Tx], error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &txn{tx: tx, q: s.q.WithTx(tx)}, nil
}

// txn is an attempt's transaction: an atomic attempt's, with its claim,
// a phase's, or one without a key (attempt 0), which stores nothing.
type txn struct {
	tx      pgx.Tx
	q       *dbsqlc.Queries
	id      idem.ID
	attempt int32
}

func (t *txn) Tx() pgx.Tx { return ownedTx{t.tx} }

// Complete stores the response and commits it with the handler's writes.
func (t *txn) Complete(ctx context.Context, r *idem.Response) error {
	if t.attempt != 0 {
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
			Attempt:         t.attempt,
		})
		if err == nil && n != 1 {
			err = idem.ErrLeaseLost
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
	// On a closed connection the server has rolled the transaction back.
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) && !errors.Is(err, pgconn.ErrConnClosed) {
		return fmt.Errorf("pgstore: roll back attempt: %w", err)
	}
	return nil
}

// Advance records the recovery point a phase reached and commits it with
// the phase's writes.
func (t *txn) Advance(ctx context.Context, point string) error {
	n, err := t.q.SetRecoveryPoint(ctx, dbsqlc.SetRecoveryPointParams{
		RecoveryPoint: point,
		Scope:         t.id.Scope,
		Operation:     t.id.Operation,
		Key:           t.id.Key,
		Attempt:       t.attempt,
	})
	if err == nil && n != 1 {
		err = idem.ErrLeaseLost
	}
	if err != nil {
		_ = t.tx.Rollback(ctx)
		return fmt.Errorf("pgstore: record recovery point %q: %w", point, err)
	}
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit phase: %w", err)
	}
	return nil
}

// lease is a phased attempt's committed claim.
type lease struct {
	s       *Store
	id      idem.ID
	attempt int32
	point   string
	lease   time.Duration
}

func (l *lease) RecoveryPoint() string { return l.point }

// Phase begins a phase's transaction and starts the phase in it: the
// key's advisory lock, the fencing check and a fresh lease.
func (l *lease) Phase(ctx context.Context) (idem.Phase[pgx.Tx], error) {
	tx, err := l.s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin phase: %w", err)
	}
	q := l.s.q.WithTx(tx)
	_, err = q.StartPhase(ctx, dbsqlc.StartPhaseParams{
		LockID:    lockID(l.id),
		Scope:     l.id.Scope,
		Operation: l.id.Operation,
		Key:       l.id.Key,
		Attempt:   l.attempt,
		LeaseMs:   l.lease.Milliseconds(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = idem.ErrLeaseLost
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgstore: start phase: %w", err)
	}
	return &txn{tx: tx, q: q, id: l.id, attempt: l.attempt}, nil
}

// Release ends the lease now; the recovery point stays for a retry.
func (l *lease) Release(ctx context.Context) error {
	_, err := l.s.q.ReleaseKey(ctx, dbsqlc.ReleaseKeyParams{
		Scope:     l.id.Scope,
		Operation: l.id.Operation,
		Key:       l.id.Key,
		Attempt:   l.attempt,
	})
	if err != nil {
		return fmt.Errorf("pgstore: release lease: %w", err)
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

var _ idem.ErrorClassifier = (*Store)(nil)

// Unavailable reports whether err means the database could not be reached
// or went away: a refused or lost connection, or a server shutting down,
// restarting or out of connections. The engine answers handler errors of
// that kind with 503, so clients retry instead of giving up on a 500.
func (s *Store) Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		pgconn.SafeToRetry(err)
}
