package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// lazyTx is an attempt's transaction that begins with the handler's first
// statement: BEGIN rides in the same round trip, so that a claim made by
// the lookup costs no round trip of its own. It is a pgx.Tx like any
// other; the attempt ends it (see claimed), never the handler.
type lazyTx struct {
	conn  *pgx.Conn
	begun bool
	// handle is a pgx.Tx for the transaction once it is open, made only
	// for what pgx offers on a Tx alone: savepoints and large objects.
	handle pgx.Tx
}

var _ pgx.Tx = (*lazyTx)(nil)

// hasQueryOptions reports whether args start with an option that only
// Conn.Exec and Conn.Query take, not a batch.
func hasQueryOptions(args []any) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
		return true
	}
	return false
}

// begin opens the transaction on its own, for the calls that cannot carry
// BEGIN with them.
func (t *lazyTx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	t.begun = true
	_, err := t.conn.Exec(ctx, "BEGIN")
	return err
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	switch {
	case t.begun || hasQueryOptions(args):
		if err := t.begin(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return t.conn.Exec(ctx, sql, args...)
	case len(args) == 0:
		// pgx sends a statement without arguments as a simple query, which
		// may hold several statements: BEGIN joins them.
		t.begun = true
		return t.conn.Exec(ctx, "BEGIN;\n"+sql)
	}
	br := t.sendWithBegin(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: sql, Arguments: args}}})
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// sendWithBegin sends b after BEGIN and reads BEGIN's answer. An error
// there leaves the batch failed, and its results report it.
func (t *lazyTx) sendWithBegin(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t.begun = true
	queued := make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)
	queued = append(queued, &pgx.QueuedQuery{SQL: "BEGIN"})
	br := t.conn.SendBatch(ctx, &pgx.Batch{QueuedQueries: append(queued, b.QueuedQueries...)})
	_, _ = br.Exec()
	return br
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun || hasQueryOptions(args) {
		if err := t.begin(ctx); err != nil {
			return errRows{err: err, m: t.conn.TypeMap()}, err
		}
		return t.conn.Query(ctx, sql, args...)
	}
	br := t.sendWithBegin(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: sql, Arguments: args}}})
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return rows, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	return t.sendWithBegin(ctx, b)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Begin starts a savepoint, as on any pgx.Tx.
func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	h, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	return h.Begin(ctx)
}

func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	// pgx makes LargeObjects only from a Tx of its own; the method takes
	// no context, so the transaction opens without one if it must.
	h, err := t.open(context.Background())
	if err != nil {
		// A LargeObjects value cannot carry an error; the engine answers a
		// handler's panic with a 500.
		panic(fmt.Errorf("pgstore: open the attempt's transaction for large objects: %w", err))
	}
	return h.LargeObjects()
}

// open returns a pgx.Tx of pgx's own for the open transaction, opening it
// first if need be. Only its statements are used, never its Commit.
func (t *lazyTx) open(ctx context.Context) (pgx.Tx, error) {
	if t.handle != nil {
		return t.handle, nil
	}
	opts := pgx.TxOptions{}
	if t.begun {
		// pgx's BeginTx runs its BeginQuery; inside the open transaction
		// an empty statement does nothing.
		opts.BeginQuery = ";"
	}
	h, err := t.conn.BeginTx(ctx, opts)
	t.begun = true
	if err != nil {
		return nil, err
	}
	t.handle = h
	return h, nil
}

func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

func (t *lazyTx) Commit(context.Context) error   { return ErrOwnedTx }
func (t *lazyTx) Rollback(context.Context) error { return ErrOwnedTx }

// batchRows are the rows of a statement sent with BEGIN: closing them
// also reads the end of the batch, which frees the connection.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// row is QueryRow's answer over Query's rows, as pgx's own is.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		if r.rows != nil {
			r.rows.Close()
		}
		return r.err
	}
	rows := r.rows
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// errRows are the rows of a query that could not be sent, since pgx's
// callers may read rows before checking the error.
type errRows struct {
	err error
	m   *pgtype.Map
}

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return r.m }
