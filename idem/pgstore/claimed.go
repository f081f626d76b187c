package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
)

var _ idem.LookupClaimer[pgx.Tx] = (*Store)(nil)

// LookupClaim reads a key like Lookup, in one statement, and when no row
// exists and no attempt holds the key, claims it for a first execution in
// the same statement: the session takes the key's advisory lock (see
// idemgen_try_claim in migration 0005). The attempt's transaction begins
// with its handler's first statement and ends with the key's row, which
// hands the lock over to the transaction (migration 0008), and COMMIT,
// sent together: a first execution costs two round trips besides its
// handler's, and four statements: the lookup, BEGIN, the row and COMMIT.
//
// A lookup that finds a row or a held key only reads; so does one on a
// store on neither a pool nor a connection, one with TransactionPooling,
// and one that finds no turn within AttemptConns free in lookupTurnWait,
// since replays must not queue behind running attempts.
func (s *Store) LookupClaim(ctx context.Context, id idem.ID, c idem.Claim) (idem.Record, idem.Txn[pgx.Tx], error) {
	params := lookupParams(id, true, c.Lease)
	lock := params.LockID
	if rec, ok := s.heldHere(lock); ok {
		return rec, nil, nil
	}
	read := params
	read.Claim = false
	if (s.pool == nil && s.conn == nil) || s.txClaims.Load() {
		rec, err := s.lookup(ctx, id, read)
		return rec, nil, err
	}
	turn, err := s.turnWithin(ctx, lookupTurnWait)
	if err != nil {
		rec, err := s.lookup(ctx, id, read)
		return rec, nil, err
	}
	conn, err := s.acquireWith(ctx, turn)
	if err != nil {
		return idem.Record{}, nil, classify("lookup key", err)
	}
	stamp := s.filterStamp(ctx)
	row, err := dbsqlc.New(conn.conn).LookupKey(ctx, params)
	if err != nil {
		// The statement may have taken the lock before it failed.
		_ = (&claimed{s: s, c: conn, lock: lock}).free(ctx, false)
		return idem.Record{}, nil, classify("lookup key", err)
	}
	if !row.Claimed {
		conn.release()
		rec, err := s.record(ctx, id, row, stamp)
		return rec, nil, err
	}
	conn.release = s.hold(lock, nil, c.Lease, conn.release)
	t := &claimed{
		s: s, c: conn, tx: &lazyTx{conn: conn.conn}, lock: lock, act: newActivity(c.Lease),
		row: dbsqlc.StoreResponseParams{
			Scope: id.Scope, Operation: id.Operation, Key: id.Key, Fingerprint: c.Fingerprint,
			Attempt: 1, Generation: 1, TtlMs: c.TTL.Milliseconds(), PerRequest: c.PerRequest,
		},
	}
	return idem.Record{}, t, nil
}

// lookupTurnWait bounds how long a lookup waits for an attempt's turn
// within AttemptConns before it settles for only reading: long enough for
// a turn to come free between attempts when the store is busy, short
// enough that a replay behind long-running attempts hardly notices.
const lookupTurnWait = 20 * time.Millisecond

// claimed is an atomic attempt whose lookup claimed its key: its session
// holds the key's advisory lock until the attempt ends.
type claimed struct {
	s    *Store
	c    attemptConn
	tx   *lazyTx
	lock int64
	row  dbsqlc.StoreResponseParams // the key's row, less its response
	act  *activity
}

func (t *claimed) Tx() pgx.Tx { return ownedTx{t.tx, t.act} }

// RecordDerivation marks the key's row as derived, so that the reaper
// keeps its generation.
func (t *claimed) RecordDerivation() { t.row.Derived = true }

// Complete writes the key's row with the response and commits it with the
// handler's writes, releasing the key, in one round trip: the row's
// statement hands the claim over to the transaction, which COMMIT ends. A handler that
// ran no statement began no transaction: the row is then written on its
// own.
func (t *claimed) Complete(ctx context.Context, r *idem.Response) error {
	if t.c.conn.PgConn().TxStatus() == 'E' {
		_ = t.free(ctx, true)
		return fmt.Errorf("pgstore: store response: the transaction was aborted by an earlier error, so it was rolled back: %w", pgx.ErrTxCommitRollback)
	}
	headers, err := json.Marshal(r.Header)
	if err != nil {
		_ = t.free(ctx, true)
		return fmt.Errorf("pgstore: encode response headers: %w", err)
	}
	row := t.row
	row.ResponseStatus, row.ResponseHeaders, row.ResponseBody = pgtype.Int4{Int32: int32(r.Status), Valid: true}, headers, r.Body
	row.ClaimLock = t.lock
	store := capture(func(q *dbsqlc.Queries) error {
		_, err := q.StoreResponse(ctx, row)
		return err
	})
	release := t.release(ctx)
	sent := time.Now()
	_, released, err := finish(ctx, t.c, "store response", store, !t.tx.begun, &release)
	if err == nil && !released {
		t.s.poolerNoticed(t.row)
	}
	return t.act.held("store response", sent, err)
}

// Abort rolls the handler's writes back and releases the key. When the
// attempt's connection was lost, PostgreSQL has done both already, and the
// error says so by matching idem.ErrStoreUnavailable.
func (t *claimed) Abort(ctx context.Context) error {
	lost := t.c.conn.IsClosed()
	sent := time.Now()
	err := t.act.held("roll back attempt", sent, t.free(ctx, true))
	if lost || (err != nil && (unavailable(err) || errors.Is(err, idem.ErrStoreUnavailable))) {
		return fmt.Errorf("pgstore: the attempt's connection was lost, so PostgreSQL rolled its transaction back: %w", idem.ErrStoreUnavailable)
	}
	if err != nil {
		return classify("roll back attempt", err)
	}
	return nil
}

// release is the statement that gives the key's lock back.
func (t *claimed) release(ctx context.Context) statement {
	return capture(func(q *dbsqlc.Queries) error {
		_, err := q.ReleaseClaim(ctx, t.lock)
		return err
	})
}

// free rolls back the transaction if one is open and gives the key's lock
// back, then the connection (see rollback). made says the claim was made
// for sure, not only perhaps by a statement that failed: a release that
// finds no claim then means a pooler.
func (t *claimed) free(ctx context.Context, made bool) error {
	release := t.release(ctx)
	released, err := rollback(ctx, t.c, &release)
	if err == nil && !released && made {
		t.s.poolerNoticed(t.row)
	}
	if err == nil && !released {
		err = errors.New("pgstore: the attempt's session no longer held the key's lock")
	}
	return err
}

// poolerNoticed handles a claim whose release reached a session that did
// not make it: a pooler in transaction mode (see
// Options.TransactionPooling). From now on the store's claims stay within
// transactions.
func (s *Store) poolerNoticed(row dbsqlc.StoreResponseParams) {
	if s.txClaims.Swap(true) {
		return
	}
	s.log.Error("pgstore: a key's claim and its release ran on different database sessions, as behind a pooler in transaction mode (PgBouncer pool_mode = transaction); "+
		"claims now use transaction-scoped locks. Set pgstore.Options.TransactionPooling to start that way: until the session that took this claim ends or sits idle for the operation's lease, the key reads as in use",
		"operation", row.Operation, "scope", row.Scope)
}
