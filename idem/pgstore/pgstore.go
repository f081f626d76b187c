// Package pgstore is the PostgreSQL key store, on pgx/v5 and the
// sqlc-generated queries of queries/idempotency_keys.sql.
//
// A replay, 409 or 422 costs one read-only statement. A first execution
// is claimed by that same statement when the key has no row: the session
// takes the key's advisory lock (LookupClaim). Its transaction begins with
// the handler's first statement, writes nothing of the store's until it
// ends, and then writes the key's row, with the response, sent with
// COMMIT; that statement hands the lock over to the transaction, which
// COMMIT releases. It runs four statements of the store's own, commits
// once, writes one row besides the handler's, costs two round trips
// besides the handler's, and a crash leaves no claim behind. Concurrent duplicates see the lock and get their
// 409 at once, without waiting for the first attempt. A key with a row is
// claimed in the statement sent with BEGIN (Claim), a round trip more.
//
// A phased attempt's claim commits on its own, with a lease (locked_until)
// and a fencing token (attempt); each phase's transaction starts by taking
// the advisory lock and checking the token, so an attempt whose lease was
// taken over can commit nothing more. Janitor sweeps abandoned leases and
// reaps expired keys.
//
// With Options.ReplayCache, replays of completed keys are answered from a
// cache in front of PostgreSQL (see redisfilter), which decides nothing
// else.
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what the store needs of a connection pool; *pgxpool.Pool and
// *pgx.Conn satisfy it.
type DB interface {
	dbsqlc.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Options configure a Store. The zero value works.
type Options struct {
	// AttemptConns bounds how many connections attempts (atomic attempts
	// and phases, each holding one for its handler) may hold at once, so
	// that the protocol's own reads (replays, 409s, 422s) never queue
	// behind running attempts. Zero: with a *pgxpool.Pool, its MaxConns
	// less a quarter, at least one kept for reads; otherwise no bound. A
	// pool of one connection keeps none: while an attempt holds it, a
	// duplicate of that attempt's key is still answered at once, from
	// what this process knows of its own attempts (409, or 422 for
	// another request under a phased key), and a request for another key
	// waits for the connection up to AcquireTimeout.
	AttemptConns int
	// AcquireTimeout bounds how long a request waits for a connection, or
	// for a turn within AttemptConns, before it is answered 503 with
	// Retry-After instead of queueing on. Zero means 3s.
	AcquireTimeout time.Duration
	// TransactionPooling must be set when the connections go through a
	// pooler that hands each transaction to any server session, such as
	// PgBouncer with pool_mode = transaction. A first execution's lookup
	// then claims nothing, and its claim is a transaction-scoped lock sent
	// with BEGIN: one round trip more. Without it, the lookup claims a
	// free key with a session-level lock, which such a pooler would leave
	// on a server session that other clients go on using. The store
	// notices that when the lock's release reaches another session than
	// its claim: it logs an error naming this option and claims as if it
	// were set from then on.
	TransactionPooling bool
	// Logger receives that error; nil uses slog.Default().
	Logger *slog.Logger
	// ReplayCache, when set, is a replay filter in front of PostgreSQL
	// (see redisfilter.New): replays of completed keys are answered from
	// it without a statement, and every other decision stays here. A
	// cache that is down or slow costs its bounded wait, never an answer.
	ReplayCache ReplayCache
}

// Store is the PostgreSQL key store. Its attempts hand handlers a pgx.Tx.
type Store struct {
	db             DB
	pool           *pgxpool.Pool // db, when it is a pool: reads acquire from it with a bound
	conn           *pgx.Conn     // db, when it is a connection
	q              *dbsqlc.Queries
	slots          chan struct{} // AttemptConns; nil for no bound
	acquireTimeout time.Duration
	log            *slog.Logger
	// txClaims: lookups claim nothing (Options.TransactionPooling, or a
	// pooler noticed).
	txClaims atomic.Bool
	filter   *filter // nil without Options.ReplayCache
	holds    holds   // the keys this store's attempts hold a connection for
}

var _ idem.Store[pgx.Tx] = (*Store)(nil)
var _ idem.Phase[pgx.Tx] = (*txn)(nil)

// New returns a store on db. The table must exist: see Migrate and Check.
func New(db DB, opts Options) *Store {
	s := &Store{db: db, q: dbsqlc.New(db), acquireTimeout: opts.AcquireTimeout, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.txClaims.Store(opts.TransactionPooling)
	if opts.ReplayCache != nil {
		s.filter = &filter{cache: opts.ReplayCache, s: s}
	}
	if s.acquireTimeout <= 0 {
		s.acquireTimeout = 3 * time.Second
	}
	s.pool, _ = db.(*pgxpool.Pool)
	s.conn, _ = db.(*pgx.Conn)
	n := opts.AttemptConns
	if n <= 0 && s.pool != nil {
		maxConns := int(s.pool.Config().MaxConns)
		n = max(1, maxConns-max(1, maxConns/4))
	}
	if n > 0 {
		s.slots = make(chan struct{}, n)
	}
	return s
}

// Capabilities reports what the store does beyond idem.Store's methods:
// a first execution's claim in its lookup, the error classifier, the
// completer's finder and async requests' acceptance always; the replay
// filter with Options.ReplayCache.
func (s *Store) Capabilities() idem.Capabilities {
	return idem.Capabilities{LookupClaim: true, ReplayFilter: s.filter != nil, ClassifyError: true, FindAbandoned: true, Accept: true}
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

// ErrNoConnection reports that no connection came free within the
// store's AcquireTimeout; it matches idem.ErrStoreUnavailable and
// idem.ErrStoreBusy.
var ErrNoConnection = errors.New("pgstore: no database connection came free in time")

// ErrConnectTimeout reports that the pool had room for a connection but
// could not open one within the store's AcquireTimeout: the database, or
// the network to it, does not answer. It matches idem.ErrStoreUnavailable,
// not idem.ErrStoreBusy.
var ErrConnectTimeout = errors.New("pgstore: no database connection could be opened in time")

// acquireTimedOut is the error of a wait for a pool's connection that
// AcquireTimeout ended: the pool was busy when every connection it may
// open was lent, and the database did not answer otherwise.
func (s *Store) acquireTimedOut() error {
	if st := s.pool.Stat(); st.AcquiredConns() < st.MaxConns() {
		return ErrConnectTimeout
	}
	return ErrNoConnection
}

// read runs f on a connection acquired within the AcquireTimeout, so
// that a full pool answers 503 quickly instead of queueing the request.
func (s *Store) read(ctx context.Context, f func(q *dbsqlc.Queries) error) error {
	if s.pool == nil {
		return f(s.q)
	}
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	conn, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = s.acquireTimedOut()
		}
		return err
	}
	defer conn.Release()
	return f(dbsqlc.New(conn))
}

// begin starts a transaction for an attempt or phase within the
// AttemptConns budget; release gives the turn back once it ends.
func (s *Store) begin(ctx context.Context) (tx pgx.Tx, release func(), err error) {
	release, err = s.turn(ctx)
	if err != nil {
		return nil, nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	tx, err = s.db.Begin(bctx)
	if err != nil {
		release()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = ErrNoConnection
			if s.pool != nil {
				err = s.acquireTimedOut()
			}
		}
		return nil, nil, err
	}
	return tx, release, nil
}

// Lookup reads a key with one read-only statement and reports what the
// row holds.
func (s *Store) Lookup(ctx context.Context, id idem.ID) (idem.Record, error) {
	return s.lookup(ctx, id, lookupParams(id, false, 0))
}

// lookup is Lookup with its statement's parameters, which carry the key's
// lock ID, computed once per request.
func (s *Store) lookup(ctx context.Context, id idem.ID, params dbsqlc.LookupKeyParams) (idem.Record, error) {
	if rec, ok := s.heldHere(params.LockID); ok {
		return rec, nil
	}
	var row dbsqlc.LookupKeyRow
	stamp := s.filterStamp(ctx)
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		row, err = q.LookupKey(ctx, params)
		return err
	})
	if err != nil {
		return idem.Record{}, classify("lookup key", err)
	}
	return s.record(ctx, id, row, stamp)
}

func lookupParams(id idem.ID, claim bool, lease time.Duration) dbsqlc.LookupKeyParams {
	return dbsqlc.LookupKeyParams{
		LockID: lockID(id), Claim: claim, IdleTimeoutMs: idleTimeout(lease).Milliseconds(),
		Scope: id.Scope, Operation: id.Operation, Key: id.Key,
	}
}

// statusEmptied is the status of a row the reaper emptied, keeping only
// the key and its generation (see Reap).
const statusEmptied = "expired"

// record is what a lookup's row of id, stamped as it was sent, reports.
// A completed row is added to the replay filter, if the store has one.
func (s *Store) record(ctx context.Context, id idem.ID, row dbsqlc.LookupKeyRow, stamp filterStamp) (idem.Record, error) {
	rec, err := record(row)
	if err == nil && s.filter != nil && rec.Completed && !rec.Expired {
		s.filter.fill(ctx, id, rec, time.Duration(row.TtlLeftMs)*time.Millisecond, stamp)
	}
	return rec, err
}

// filterStamp is what a lookup sent now records for the replay filter's
// entries; a store without a filter records nothing.
func (s *Store) filterStamp(ctx context.Context) filterStamp {
	if s.filter == nil {
		return filterStamp{}
	}
	return s.filter.stamp(ctx)
}

// record is what a lookup's row reports.
func record(row dbsqlc.LookupKeyRow) (idem.Record, error) {
	rec := idem.Record{Held: row.Held, Found: row.Found}
	if !row.Found {
		return rec, nil
	}
	rec.Generation = row.Generation.Int64
	rec.Attempt = int64(row.Attempt.Int32)
	rec.PerRequest = row.PerRequest
	if row.Status.String == statusEmptied {
		rec.Completed, rec.Expired = true, true
		return rec, nil
	}
	rec.Completed = row.Status.String == "completed"
	rec.Fingerprint = row.Fingerprint
	rec.Expired = row.Expired
	rec.RecoveryPoint = row.RecoveryPoint.String
	if !rec.Completed {
		rec.LeaseLeft = time.Duration(row.LeaseLeftMs) * time.Millisecond
		return rec, nil
	}
	var h http.Header
	if err := json.Unmarshal(row.ResponseHeaders, &h); err != nil {
		return idem.Record{}, fmt.Errorf("pgstore: stored response headers: %w", err)
	}
	rec.Response = &idem.Response{Status: int(row.ResponseStatus.Int32), Header: h, Body: row.ResponseBody}
	return rec, nil
}

// Claim begins the attempt's transaction with its claim, in one round
// trip: the key's advisory lock and the check that its row is still the
// one the engine read. It writes nothing; Complete writes the key's row.
func (s *Store) Claim(ctx context.Context, id idem.ID, c idem.Claim) (idem.Txn[pgx.Tx], error) {
	row := &dbsqlc.StoreResponseParams{
		Scope: id.Scope, Operation: id.Operation, Key: id.Key, Fingerprint: c.Fingerprint,
		Attempt: int32(c.Attempt) + 1, Generation: max(c.Generation, 1), TtlMs: c.TTL.Milliseconds(), Takeover: c.Takeover,
		PerRequest: c.PerRequest,
	}
	lock := lockID(id)
	st := capture(func(q *dbsqlc.Queries) error {
		return q.ClaimAtomic(ctx, dbsqlc.ClaimAtomicParams{
			LockID: lock, IdleTimeoutMs: idleTimeout(c.Lease).Milliseconds(),
			Scope: id.Scope, Operation: id.Operation, Key: id.Key, ExpectAttempt: int32(c.Attempt), Takeover: c.Takeover,
		})
	})
	conn, pipelined, err := s.acquire(ctx)
	if err != nil {
		return nil, classify("begin", err)
	}
	if !pipelined {
		tx, release, err := s.begin(ctx)
		if err != nil {
			return nil, classify("begin", err)
		}
		if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			release()
			return nil, claimError(err)
		}
		return &txn{tx: tx, q: s.q.WithTx(tx), id: id, row: row, release: s.hold(lock, nil, c.Lease, release), act: newActivity(c.Lease)}, nil
	}
	tx, err := beginWith(ctx, conn, st)
	if err != nil {
		return nil, claimError(err)
	}
	conn.release = s.hold(lock, nil, c.Lease, conn.release)
	return &txn{tx: tx, q: s.q.WithTx(tx), id: id, row: row, conn: &conn, release: conn.release, act: newActivity(c.Lease)}, nil
}

// hold records that an attempt holds the key whose lock ID is lock (see
// holds) until release, which it wraps, gives its connection back.
func (s *Store) hold(lock int64, fingerprint []byte, lease time.Duration, release func()) func() {
	remove := s.holds.add(lock, &hold{fingerprint: fingerprint, until: time.Now().Add(lease)})
	var once sync.Once
	return func() { once.Do(func() { remove(); release() }) }
}

func claimError(err error) error {
	if hasCode(err, codeContended) {
		return idem.ErrContended
	}
	return classify("claim key", err)
}

// Lease claims the key in a statement of its own, which commits at once.
func (s *Store) Lease(ctx context.Context, id idem.ID, c idem.Claim) (idem.Lease[pgx.Tx], error) {
	var attempt int32
	var point string
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		attempt, point, err = claim(ctx, q, id, c)
		return err
	})
	if err != nil {
		if !errors.Is(err, idem.ErrContended) {
			err = classify("claim key", err)
		}
		return nil, err
	}
	return &lease{s: s, id: id, attempt: attempt, point: point, lease: c.Lease, fingerprint: c.Fingerprint}, nil
}

// claim runs ClaimKey: inside the attempt's transaction for Claim, on its
// own for Lease.
func claim(ctx context.Context, q *dbsqlc.Queries, id idem.ID, c idem.Claim) (attempt int32, point string, err error) {
	row, err := q.ClaimKey(ctx, dbsqlc.ClaimKeyParams{
		LockID:        lockID(id),
		IdleTimeoutMs: idleTimeout(c.Lease).Milliseconds(),
		Scope:         id.Scope,
		Operation:     id.Operation,
		Key:           id.Key,
		Fingerprint:   c.Fingerprint,
		LeaseMs:       c.Lease.Milliseconds(),
		Generation:    max(c.Generation, 1),
		Request:       c.Request,
		TtlMs:         c.TTL.Milliseconds(),
		Takeover:      c.Takeover,
		ExpectAttempt: int32(c.Attempt),
		PerRequest:    c.PerRequest,
	})
	if err != nil {
		return 0, "", classify("claim key", err)
	}
	if !row.Got || !row.RecoveryPoint.Valid {
		return 0, "", idem.ErrContended
	}
	return row.Attempt.Int32, row.RecoveryPoint.String, nil
}

// idleTimeout is how long an attempt's transaction may sit idle before
// PostgreSQL ends it, freeing the key of a holder that vanished: the
// lease, within which an attempt must finish anyway.
func idleTimeout(lease time.Duration) time.Duration {
	return max(lease, time.Second)
}

// Secret reads the key of derived keys that the migrations created.
func (s *Store) Secret(ctx context.Context) ([]byte, error) {
	var secret []byte
	err := s.read(ctx, func(q *dbsqlc.Queries) (err error) {
		secret, err = q.GetSecret(ctx)
		return err
	})
	if err != nil {
		return nil, classify("read the derived-key secret", err)
	}
	return secret, nil
}

// Begin starts a transaction for an attempt without a key.
func (s *Store) Begin(ctx context.Context) (idem.Txn[pgx.Tx], error) {
	tx, release, err := s.begin(ctx)
	if err != nil {
		return nil, classify("begin", err)
	}
	return &txn{tx: tx, q: s.q.WithTx(tx), release: release}, nil
}

// txn is an attempt's transaction: an atomic attempt's, with its claim,
// a phase's, or one without a key (attempt 0), which stores nothing.
type txn struct {
	tx      pgx.Tx
	q       *dbsqlc.Queries
	id      idem.ID
	attempt int32                       // a phase's fencing token; 0 for the others
	row     *dbsqlc.StoreResponseParams // an atomic attempt's key row, less its response
	// conn is the connection held for the transaction when it was begun
	// with its first statement: ending it sends the last with COMMIT.
	conn    *attemptConn
	release func()    // gives the connection or AttemptConns turn back
	act     *activity // nil for an attempt without a key
}

func (t *txn) Tx() pgx.Tx { return ownedTx{t.tx, t.act} }

// RecordDerivation marks an atomic attempt's key row as derived, so that
// the reaper keeps its generation.
func (t *txn) RecordDerivation() {
	if t.row != nil {
		t.row.Derived = true
	}
}

// Complete stores the response and commits it with the handler's writes:
// an atomic attempt's key row, written here for the first time, or a
// phase's completed row.
func (t *txn) Complete(ctx context.Context, r *idem.Response) error {
	if t.row == nil && t.attempt == 0 {
		defer t.release()
		return commit(ctx, t.tx, "commit attempt")
	}
	headers, err := json.Marshal(r.Header)
	if err != nil {
		t.abandon(ctx)
		return fmt.Errorf("pgstore: encode response headers: %w", err)
	}
	status := pgtype.Int4{Int32: int32(r.Status), Valid: true}
	if t.row != nil {
		row := *t.row
		row.ResponseStatus, row.ResponseHeaders, row.ResponseBody = status, headers, r.Body
		_, err := t.end(ctx, "store response", capture(func(q *dbsqlc.Queries) error {
			_, err := q.StoreResponse(ctx, row)
			return err
		}))
		return err
	}
	// The phase's start locked the row, so it is still this attempt's.
	n, err := t.end(ctx, "store response", capture(func(q *dbsqlc.Queries) error {
		_, err := q.CompleteKey(ctx, dbsqlc.CompleteKeyParams{
			ResponseStatus: status, ResponseHeaders: headers, ResponseBody: r.Body,
			Scope: t.id.Scope, Operation: t.id.Operation, Key: t.id.Key, Attempt: t.attempt,
		})
		return err
	}))
	if err == nil && n != 1 {
		return fmt.Errorf("pgstore: store response: %w", idem.ErrLeaseLost)
	}
	return err
}

// end runs the attempt's last statement and commits: in one round trip
// when the transaction was begun with its first.
func (t *txn) end(ctx context.Context, what string, st statement) (int64, error) {
	sent := time.Now()
	if t.conn != nil {
		rows, _, err := finish(ctx, *t.conn, what, st, false, nil)
		return rows, t.act.held(what, sent, err)
	}
	defer t.release()
	tag, err := t.tx.Exec(ctx, st.sql, st.args...)
	if err != nil {
		_ = t.tx.Rollback(context.WithoutCancel(ctx))
		return 0, t.act.held(what, sent, classify(what, err))
	}
	return tag.RowsAffected(), t.act.held("commit attempt", sent, commit(ctx, t.tx, "commit attempt"))
}

// abandon rolls back and gives the connection back, for errors of the
// store's own making.
func (t *txn) abandon(ctx context.Context) {
	_ = t.tx.Rollback(context.WithoutCancel(ctx))
	t.release()
}

// commit commits tx. A commit whose acknowledgement was lost after it was
// sent may have committed: the error then also matches
// idem.ErrCommitUnknown.
func commit(ctx context.Context, tx pgx.Tx, what string) error {
	if err := tx.Commit(ctx); err != nil {
		return commitError(what, err)
	}
	return nil
}

// commitError classifies an error of a COMMIT that was, or may have been,
// sent.
func commitError(what string, err error) error {
	err = classify(what, err)
	if errors.Is(err, idem.ErrStoreUnavailable) && !pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", idem.ErrCommitUnknown, err)
	}
	return err
}

// Abort rolls the attempt back, claim and writes together. When the
// attempt's connection was lost, PostgreSQL has rolled it back already,
// and the error says so by matching idem.ErrStoreUnavailable.
func (t *txn) Abort(ctx context.Context) error {
	// Read before the rollback, which hands a pool's connection back.
	lost := t.tx.Conn().IsClosed()
	sent := time.Now()
	var err error
	if t.conn != nil {
		_, err = rollback(ctx, *t.conn, nil)
	} else {
		defer t.release()
		err = t.tx.Rollback(ctx)
	}
	err = t.act.held("roll back attempt", sent, err)
	if lost || (err != nil && (unavailable(err) || errors.Is(err, idem.ErrStoreUnavailable))) {
		return fmt.Errorf("pgstore: the attempt's connection was lost, so PostgreSQL rolled its transaction back: %w", idem.ErrStoreUnavailable)
	}
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return classify("roll back attempt", err)
	}
	return nil
}

// Advance records the recovery point a phase reached and commits it with
// the phase's writes, in one round trip. The phase's start locked the
// key's row, so no takeover or sweep can have changed it.
func (t *txn) Advance(ctx context.Context, point string) error {
	n, err := t.end(ctx, fmt.Sprintf("record recovery point %q", point), capture(func(q *dbsqlc.Queries) error {
		_, err := q.SetRecoveryPoint(ctx, dbsqlc.SetRecoveryPointParams{
			RecoveryPoint: point, Scope: t.id.Scope, Operation: t.id.Operation, Key: t.id.Key, Attempt: t.attempt,
		})
		return err
	}))
	if err == nil && n != 1 {
		return fmt.Errorf("pgstore: record recovery point %q: %w", point, idem.ErrLeaseLost)
	}
	return err
}

// lease is a phased attempt's committed claim.
type lease struct {
	s           *Store
	id          idem.ID
	attempt     int32
	point       string
	lease       time.Duration
	fingerprint []byte
}

func (l *lease) RecoveryPoint() string { return l.point }

// Phase begins a phase's transaction with the phase's start, in one round
// trip: the key's advisory lock, the fencing check and a fresh lease.
func (l *lease) Phase(ctx context.Context) (idem.Phase[pgx.Tx], error) {
	lock := lockID(l.id)
	st := capture(func(q *dbsqlc.Queries) error {
		return q.BeginPhase(ctx, dbsqlc.BeginPhaseParams{
			LockID: lock, IdleTimeoutMs: idleTimeout(l.lease).Milliseconds(),
			Scope: l.id.Scope, Operation: l.id.Operation, Key: l.id.Key, Attempt: l.attempt, LeaseMs: l.lease.Milliseconds(),
		})
	})
	conn, pipelined, err := l.s.acquire(ctx)
	if err != nil {
		return nil, classify("begin phase", err)
	}
	if !pipelined {
		tx, release, err := l.s.begin(ctx)
		if err != nil {
			return nil, classify("begin phase", err)
		}
		if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			release()
			return nil, phaseError(err)
		}
		return &txn{tx: tx, q: l.s.q.WithTx(tx), id: l.id, attempt: l.attempt, release: l.s.hold(lock, l.fingerprint, l.lease, release), act: newActivity(l.lease)}, nil
	}
	tx, err := beginWith(ctx, conn, st)
	if err != nil {
		return nil, phaseError(err)
	}
	conn.release = l.s.hold(lock, l.fingerprint, l.lease, conn.release)
	return &txn{tx: tx, q: l.s.q.WithTx(tx), id: l.id, attempt: l.attempt, conn: &conn, release: conn.release, act: newActivity(l.lease)}, nil
}

func phaseError(err error) error {
	if hasCode(err, codeLeaseLost) {
		return fmt.Errorf("pgstore: start phase: %w", idem.ErrLeaseLost)
	}
	return classify("start phase", err)
}

// Release ends the lease now; the recovery point stays for a retry.
func (l *lease) Release(ctx context.Context) error {
	err := l.s.read(ctx, func(q *dbsqlc.Queries) error {
		_, err := q.ReleaseKey(ctx, dbsqlc.ReleaseKeyParams{
			Scope:     l.id.Scope,
			Operation: l.id.Operation,
			Key:       l.id.Key,
			Attempt:   l.attempt,
		})
		return err
	})
	if err != nil {
		return classify("release lease", err)
	}
	return nil
}

// ErrOwnedTx is returned when a handler commits or rolls back the
// attempt's transaction: the engine ends it, with the stored response.
var ErrOwnedTx = errors.New("pgstore: the attempt's transaction is committed by the idempotency layer with the response; return a response or an error instead")

// classify wraps an error of the store's own database calls in its class
// (see idem.ErrStoreUnavailable): the engine answers by the class alone,
// so it is decided here, where the error arises.
func classify(what string, err error) error {
	switch {
	case errors.Is(err, ErrNoConnection):
		return fmt.Errorf("pgstore: %s: %w: %w: %w", what, idem.ErrStoreUnavailable, idem.ErrStoreBusy, err)
	case hasCode(err, "25P03") || hasCode(err, "57P05"):
		// The transaction or session sat idle for longer than the
		// attempt's lease, which sets these timeouts.
		return fmt.Errorf("pgstore: %s: %w: %w", what, idem.ErrLeaseOverrun, err)
	case errors.Is(err, idem.ErrStoreUnavailable):
		return err // classified where it arose (see activity)
	case unavailable(err):
		return fmt.Errorf("pgstore: %s: %w: %w", what, idem.ErrStoreUnavailable, err)
	case rejectedInput(err):
		return fmt.Errorf("pgstore: %s: %w: %w", what, idem.ErrStoreRejectedInput, err)
	case misconfigured(err):
		return fmt.Errorf("pgstore: %s: %w: %w", what, idem.ErrStoreMisconfigured, err)
	case hasCode(err, "40001") || hasCode(err, "40P01"): // serialization_failure, deadlock_detected
		return fmt.Errorf("pgstore: %s: %w: %w", what, idem.ErrTransactionConflict, err)
	}
	return fmt.Errorf("pgstore: %s: %w", what, err)
}

// ClassifyError classifies an error of a handler's own statement as the
// store's own are (see idem.ErrorClassifier). Of the data exceptions,
// only those a request's value causes (valueRefused) are the request's:
// a division by zero in the handler's query is the handler's.
func (s *Store) ClassifyError(err error) error {
	if rejectedInput(err) && !valueRefused(err) {
		return fmt.Errorf("pgstore: attempt: %w", err)
	}
	return classify("attempt", err)
}

// valueRefused reports whether PostgreSQL refused a value sent to it: too
// long, out of range, not of its type's syntax, or holding a character
// the database cannot store (a NUL).
func valueRefused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "22001", // string_data_right_truncation
		"22003",          // numeric_value_out_of_range
		"22007", "22008", // invalid_datetime_format, datetime_field_overflow
		"22021", // character_not_in_repertoire: a NUL, or bytes that are not UTF-8
		"22P02", // invalid_text_representation
		"22P05", // untranslatable_character
		"54000": // program_limit_exceeded: a value too large for an index
		return true
	}
	return false
}

// misconfigured reports whether err means the store's schema is missing or
// older than this code, or the role may not use it: what Check reports;
// or that the pool's credentials or database name are wrong.
// Any other error, such as a constraint of the handler's own writes
// failing at COMMIT, is not the store's configuration.
func misconfigured(err error) bool {
	var pgErr *pgconn.PgError
	ok := errors.As(err, &pgErr)
	if !ok {
		return false
	}
	switch pgErr.Code {
	case "42P01", "42703", "42883", "42704", // undefined table, column, function, object
		"3F000",          // invalid_schema_name
		"42501",          // insufficient_privilege
		"25006",          // read_only_sql_transaction: connected to a standby
		"28000", "28P01", // invalid_authorization_specification, invalid_password
		"3D000": // invalid_catalog_name: no such database
		return true
	}
	return false
}

// unavailable reports whether err means the database could not be reached
// or went away: a refused or lost connection, a server shutting down,
// restarting or out of connections, or no free connection in time.
func unavailable(err error) bool {
	if target := (*pgconn.ConnectError)(nil); errors.As(err, &target) {
		// Whatever the server said when it refused the session, such as
		// a database not accepting connections (55000), unless it is
		// the deployment's own mistake.
		return !misconfigured(err)
	}
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception
	}
	if target := (net.Error)(nil); errors.As(err, &target) {
		return true
	}
	return errors.Is(err, ErrNoConnection) || errors.Is(err, ErrConnectTimeout) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.SafeToRetry(err)
}

// rejectedInput reports whether PostgreSQL refused a value the request
// supplied: a data exception, or a key too large for the table's index.
func rejectedInput(err error) bool {
	var pgErr *pgconn.PgError
	ok := errors.As(err, &pgErr)
	return ok && (strings.HasPrefix(pgErr.Code, "22") || pgErr.Code == "54000")
}
