package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// activity is when an attempt's connection last heard back from
// PostgreSQL. PostgreSQL ends a transaction that sat idle for the lease
// (idle_in_transaction_session_timeout); when that answers a statement
// the server sent sooner than the lease after its last reply, the
// handler did not pause that long: the network held the statement, as a
// partition or a frozen host does, and the store was unavailable rather
// than the work too slow.
type activity struct {
	idle time.Duration // the transaction's idle timeout
	last atomic.Int64  // Unix nanoseconds of the last reply
}

func newActivity(lease time.Duration) *activity {
	a := &activity{idle: idleTimeout(lease)}
	a.mark()
	return a
}

func (a *activity) mark() { a.last.Store(time.Now().UnixNano()) }

// held returns err, of a statement sent at sent, as the outage it was
// when the network held the statement (see activity), and err otherwise.
// The outage does not match idem.ErrLeaseOverrun.
func (a *activity) held(what string, sent time.Time, err error) error {
	if a == nil || err == nil || !(hasCode(err, "25P03") || hasCode(err, "57P05")) {
		return err
	}
	gap := sent.Sub(time.Unix(0, a.last.Load()))
	if gap >= a.idle {
		return err
	}
	return fmt.Errorf("pgstore: %s: %w: PostgreSQL ended the transaction as idle for %v, though its statement was sent %v after the last reply, so the network held it: %v",
		what, idem.ErrStoreUnavailable, a.idle, gap.Round(time.Millisecond), err)
}

// ownedTx is the attempt's transaction as the handler sees it: everything
// but ending it, each statement's reply noted in its activity. Savepoints
// (Begin) work as usual.
type ownedTx struct {
	pgx.Tx
	act *activity // nil for an attempt without a lease
}

func (ownedTx) Commit(context.Context) error   { return ErrOwnedTx }
func (ownedTx) Rollback(context.Context) error { return ErrOwnedTx }

// done notes a statement's reply and classifies its error.
func (t ownedTx) done(sent time.Time, err error) error {
	if t.act == nil {
		return err
	}
	err = t.act.held("attempt", sent, err)
	t.act.mark()
	return err
}

func (t ownedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	sent := time.Now()
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, t.done(sent, err)
}

func (t ownedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	sent := time.Now()
	rows, err := t.Tx.Query(ctx, sql, args...)
	return rows, t.done(sent, err)
}

func (t ownedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	sent := time.Now()
	return heldRow{t.Tx.QueryRow(ctx, sql, args...), t, sent}
}

func (t ownedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	defer t.done(time.Now(), nil)
	return t.Tx.SendBatch(ctx, b)
}

func (t ownedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	sent := time.Now()
	n, err := t.Tx.CopyFrom(ctx, table, columns, src)
	return n, t.done(sent, err)
}

// heldRow is QueryRow's row, whose error comes with Scan.
type heldRow struct {
	pgx.Row
	tx   ownedTx
	sent time.Time
}

func (r heldRow) Scan(dest ...any) error { return r.tx.done(r.sent, r.Row.Scan(dest...)) }
