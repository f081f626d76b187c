package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
)

var _ idem.Accepter[pgx.Tx] = (*Store)(nil)

// Accept claims a key for a request of an async operation and enqueues
// its job in one transaction: the claim writes the in-flight row with the
// request and a lease that has passed already, so that a worker takes it
// over at once; enqueue inserts the job (River's InsertTx) on the same
// transaction; one COMMIT makes both visible, or neither. BEGIN rides with
// the claim, so it costs three round trips: the claim, the job's insert
// and COMMIT.
func (s *Store) Accept(ctx context.Context, id idem.ID, c idem.Claim, enqueue func(ctx context.Context, tx pgx.Tx) error) error {
	c.Lease, c.Takeover = 0, false
	conn, pipelined, err := s.acquire(ctx)
	if err != nil {
		return classify("accept", err)
	}
	if !pipelined {
		return s.acceptInTx(ctx, id, c, enqueue)
	}
	tx := &lazyTx{conn: conn.conn}
	if _, _, err := claim(ctx, dbsqlc.New(tx), id, c); err != nil {
		_, _ = rollback(ctx, conn, nil)
		return err
	}
	if err := enqueue(ctx, tx); err != nil {
		_, _ = rollback(ctx, conn, nil)
		return classify("enqueue the accepted request's job", err)
	}
	defer conn.release()
	tag, err := conn.conn.Exec(ctx, "COMMIT")
	switch {
	case err != nil:
		return commitError("accept", err)
	case tag.String() != "COMMIT":
		// The transaction had failed, so COMMIT rolled it back.
		return fmt.Errorf("pgstore: accept: the transaction was rolled back at COMMIT (%s)", tag)
	}
	return nil
}

// Accept accepts an async request on the key this lookup claimed,
// instead of running it: the job is inserted first (BEGIN rides with it),
// then the key's in-flight row is written with c.Request, taking the
// session's claim over to the transaction, and sent with COMMIT. After
// the lookup that claimed, that is two round trips and one commit, as an
// atomic attempt's: one fewer than Store.Accept.
func (t *claimed) Accept(ctx context.Context, c idem.Claim, enqueue func(ctx context.Context, tx pgx.Tx) error) error {
	if err := enqueue(ctx, t.tx); err != nil {
		_ = t.free(ctx, true)
		return classify("enqueue the accepted request's job", err)
	}
	row := dbsqlc.AcceptClaimedParams{
		Scope: t.row.Scope, Operation: t.row.Operation, Key: t.row.Key, Fingerprint: c.Fingerprint,
		PerRequest: c.PerRequest, Request: c.Request, TtlMs: c.TTL.Milliseconds(), ClaimLock: t.lock,
	}
	st := capture(func(q *dbsqlc.Queries) error {
		_, err := q.AcceptClaimed(ctx, row)
		return err
	})
	release := t.release(ctx)
	_, released, err := finish(ctx, t.c, "accept", st, !t.tx.begun, &release)
	switch {
	case hasCode(err, "23505"):
		// unique_violation: a row no claimant should have written; the
		// engine reads the key again.
		return fmt.Errorf("pgstore: accept: the key has a row already: %w", idem.ErrContended)
	case err != nil:
		return err
	case !released:
		t.s.poolerNoticed(t.row)
	}
	return nil
}

// acceptInTx is Accept on a store whose database offers no connection
// of its own (DB is neither a pool nor a connection).
func (s *Store) acceptInTx(ctx context.Context, id idem.ID, c idem.Claim, enqueue func(ctx context.Context, tx pgx.Tx) error) error {
	tx, release, err := s.begin(ctx)
	if err != nil {
		return classify("accept", err)
	}
	defer release()
	if _, _, err := claim(ctx, s.q.WithTx(tx), id, c); err != nil {
		rollbackQuietly(ctx, tx)
		return err
	}
	if err := enqueue(ctx, tx); err != nil {
		rollbackQuietly(ctx, tx)
		return classify("enqueue the accepted request's job", err)
	}
	return commit(ctx, tx, "accept")
}

// rollbackQuietly ends a transaction whose error is reported already;
// with ctx ended, pgx closes the connection, which rolls it back too.
func rollbackQuietly(ctx context.Context, tx pgx.Tx) {
	_ = tx.Rollback(ctx)
}

// AcceptedRequest returns the request an in-flight key keeps, for the
// worker of an async operation; nil when it keeps none.
func (s *Store) AcceptedRequest(ctx context.Context, id idem.ID) ([]byte, error) {
	var request []byte
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		request, err = q.GetRequest(ctx, dbsqlc.GetRequestParams{Scope: id.Scope, Operation: id.Operation, Key: id.Key})
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("pgstore: read the accepted request: the key is not in flight: %w", idem.ErrContended)
	case err != nil:
		return nil, classify("read the accepted request", err)
	}
	return request, nil
}
