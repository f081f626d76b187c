package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
)

// Attempts pipeline what needs no answer in between: the statement that
// claims a key (or starts a phase) rides with BEGIN, and the one that
// stores the response (or the recovery point) with COMMIT, so that a claim
// made apart from the lookup, and each phase, cost two round trips besides
// the handler's. An attempt its lookup claimed needs neither (claimed.go).

// SQLSTATEs the claim functions of migration 0004 raise.
const (
	codeContended = "IG409" // the key is held, or changed since it was read
	codeLeaseLost = "IG410" // a phased attempt no longer holds the key
)

// ErrSimpleProtocol reports a connection on which a statement cannot be
// sent with BEGIN: its literals are quoted as standard_conforming_strings
// = on reads them, PostgreSQL's default, and pgx's own requirement for
// its simple protocol.
var ErrSimpleProtocol = errors.New("pgstore: the connection has standard_conforming_strings off; set it on (the server's default)")

// statement is a query as a sqlc method would send it, captured to be
// sent pipelined with BEGIN or COMMIT instead.
type statement struct {
	sql  string
	args []any
}

// capture returns the statement that send makes through q.
func capture(send func(q *dbsqlc.Queries) error) statement {
	var s statement
	_ = send(dbsqlc.New(&s))
	return s
}

func (s *statement) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.sql, s.args = sql, args
	return pgconn.CommandTag{}, nil
}

var errNotPipelined = errors.New("pgstore: only statements without results are pipelined")

func (s *statement) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errNotPipelined
}

// QueryRow captures a statement with one row of results, to be read from
// the batch it is sent in.
func (s *statement) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	s.sql, s.args = sql, args
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errNotPipelined }

// withBegin returns BEGIN followed by query with its $n parameters
// replaced by args as literals: one simple-protocol message, one round
// trip, that pgx's BeginTx sends and answers with a pgx.Tx. The queries
// given it hold no literals of their own, only placeholders.
func withBegin(conn *pgx.Conn, st statement) (string, error) {
	return inlined(conn, "BEGIN;\n", st)
}

// inlined returns prefix followed by st with its $n parameters replaced
// by args as literals, to be sent as one simple-protocol message: one
// round trip, and no statement to prepare, which a transaction that an
// error aborted would refuse.
func inlined(conn *pgx.Conn, prefix string, st statement) (string, error) {
	query, args := st.sql, st.args
	if conn.PgConn().ParameterStatus("standard_conforming_strings") != "on" {
		return "", ErrSimpleProtocol
	}
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < len(query); i++ {
		if query[i] != '$' {
			b.WriteByte(query[i])
			continue
		}
		j := i + 1
		for j < len(query) && query[j] >= '0' && query[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(query[i+1 : j])
		if err != nil || n < 1 || n > len(args) {
			return "", fmt.Errorf("pgstore: parameter %q of a pipelined query has no argument", query[i:j])
		}
		lit, err := literal(args[n-1])
		if err != nil {
			return "", err
		}
		b.WriteString(lit)
		i = j - 1
	}
	return b.String(), nil
}

// literal quotes v for standard_conforming_strings = on.
func literal(v any) (string, error) {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case bool:
		return strconv.FormatBool(v), nil
	case string:
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			// The engine refuses such keys and scopes before any claim.
			return "", fmt.Errorf("pgstore: a key, scope or operation holds NUL or invalid UTF-8")
		}
		return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
	}
	return "", fmt.Errorf("pgstore: no literal for %T", v)
}

// hasCode reports whether err is a PostgreSQL error with SQLSTATE code.
func hasCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	ok := errors.As(err, &pgErr)
	return ok && pgErr.Code == code
}

// attemptConn is a connection held for an attempt's transaction.
type attemptConn struct {
	conn    *pgx.Conn
	release func() // gives the connection and the AttemptConns turn back
}

// acquire takes a connection for an attempt within the AttemptConns
// budget and the AcquireTimeout. ok is false when db is neither a pool
// nor a connection: its attempts then send each statement on its own.
func (s *Store) acquire(ctx context.Context) (c attemptConn, ok bool, err error) {
	if s.pool == nil && s.conn == nil {
		return attemptConn{}, false, nil
	}
	turn, err := s.turn(ctx)
	if err != nil {
		return attemptConn{}, true, err
	}
	c, err = s.acquireWith(ctx, turn)
	return c, true, err
}

// acquireWith takes a connection for an attempt that has its turn; it
// gives the turn back if none comes.
func (s *Store) acquireWith(ctx context.Context, turn func()) (attemptConn, error) {
	if s.conn != nil {
		return attemptConn{conn: s.conn, release: turn}, nil
	}
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	pc, err := s.pool.Acquire(actx)
	if err != nil {
		turn()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = s.acquireTimedOut()
		}
		return attemptConn{}, err
	}
	var once sync.Once
	return attemptConn{conn: pc.Conn(), release: func() { once.Do(func() { pc.Release(); turn() }) }}, nil
}

// turn waits for a turn within AttemptConns for up to the AcquireTimeout;
// the function it returns gives it back, once.
func (s *Store) turn(ctx context.Context) (func(), error) {
	return s.turnWithin(ctx, s.acquireTimeout)
}

// turnWithin waits for a turn for up to d, failing with ErrNoConnection
// when none comes free.
func (s *Store) turnWithin(ctx context.Context, d time.Duration) (func(), error) {
	if s.slots == nil {
		return func() {}, nil
	}
	select {
	case s.slots <- struct{}{}:
	default:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-t.C:
			return nil, ErrNoConnection
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-s.slots }) }, nil
}

// beginWith begins a transaction on c whose first statement is query:
// one round trip. A statement that fails leaves the transaction aborted;
// it is rolled back and c released before the error returns.
func beginWith(ctx context.Context, c attemptConn, st statement) (pgx.Tx, error) {
	sql, err := withBegin(c.conn, st)
	if err != nil {
		c.release()
		return nil, err
	}
	tx, err := c.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: sql})
	if err != nil {
		_, _ = rollback(ctx, c, nil)
		return nil, err
	}
	return tx, nil
}

// Every attempt held on a connection of its own ends one of two ways,
// whether its claim is a transaction's (Claim, a phase) or its session's
// (LookupClaim): finish or rollback.

// finish ends an attempt's transaction on c in one round trip: BEGIN first
// when begin is set (no statement of the handler began it), the attempt's
// last statement st, and COMMIT. When the session holds the key's lock
// (claim, its release), st hands it over to the transaction and returns
// whether it found it (StoreResponse), so that COMMIT frees the key with
// its row visible. It reports the rows st changed and whether the
// handover found the lock, and gives c back. A COMMIT whose
// acknowledgement was lost may have committed: the error then also
// matches idem.ErrCommitUnknown. When anything fails, the transaction is
// rolled back and the lock released as rollback does.
func finish(ctx context.Context, c attemptConn, what string, st statement, begin bool, claim *statement) (rows int64, released bool, err error) {
	b := &pgx.Batch{}
	if begin {
		b.Queue("BEGIN")
	}
	b.Queue(st.sql, st.args...)
	b.Queue("COMMIT")
	br := c.conn.SendBatch(ctx, b)
	// Any of them may fail after all were sent: a lost connection then
	// leaves the outcome unknown.
	if begin {
		_, err = br.Exec()
	}
	var tag, commitTag pgconn.CommandTag
	if err == nil && claim != nil {
		var rs pgx.Rows
		if rs, err = br.Query(); err == nil {
			for rs.Next() {
				err = rs.Scan(&released)
			}
			rs.Close()
			if err == nil {
				err = rs.Err()
			}
			tag = rs.CommandTag()
		}
	} else if err == nil {
		tag, err = br.Exec()
	}
	if err == nil {
		commitTag, err = br.Exec()
	}
	if err == nil {
		err = br.Close()
	}
	if err != nil {
		_ = br.Close()
		err = commitError(what, err)
		_, _ = rollback(ctx, c, claim)
		return 0, false, err
	}
	if commitTag.String() != "COMMIT" {
		// The transaction rolled back, and the handover with it: the
		// session's lock is gone, and release resets what is left.
		_, _ = rollback(ctx, c, claim)
		return 0, false, fmt.Errorf("pgstore: %s: the transaction was aborted by an earlier error, so COMMIT rolled it back: %w", what, pgx.ErrTxCommitRollback)
	}
	if claim != nil && !released {
		// A session lock must not outlive its attempt on a pooled
		// connection: closing it ends the session, and the lock with it.
		_ = c.conn.Close(context.WithoutCancel(ctx))
	}
	c.release()
	return tag.RowsAffected(), released, nil
}

// rollback ends an attempt's transaction on c without committing it:
// ROLLBACK when a transaction is open, and, when the session holds the
// key's lock (claim), the lock's release, as one simple-protocol message,
// since a statement prepared first would be refused by a transaction that
// an error aborted. It reports whether the release found the lock, and
// gives c back: closed instead when any of it fails or the release did not
// find the lock, which ends the session, its transaction and its lock.
func rollback(ctx context.Context, c attemptConn, claim *statement) (released bool, err error) {
	defer c.release()
	conn := c.conn
	if conn.IsClosed() {
		return false, pgconn.ErrConnClosed
	}
	// It runs whether or not the request has ended, within the caller's
	// deadline, if any, since a connection that stops answering must not
	// hold the request; a rollback that cannot be sent closes it instead.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(endTimeout)
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	sql := ""
	if conn.PgConn().TxStatus() != 'I' {
		sql = "ROLLBACK;\n"
	}
	if claim != nil {
		release, err := inlined(conn, "", *claim)
		if err != nil {
			_ = conn.Close(ctx)
			return false, err
		}
		sql += release
	}
	if sql == "" {
		return false, nil
	}
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	if err == nil && claim != nil {
		last := results[len(results)-1]
		if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
			err = errors.New("pgstore: the release of the key's lock returned no row")
		} else {
			released = string(last.Rows[0][0]) == "t"
		}
	}
	if err != nil || (claim != nil && !released) {
		_ = conn.Close(ctx)
	}
	return released, err
}

// endTimeout bounds a rollback whose caller set no deadline.
const endTimeout = 5 * time.Second
