package pgstore_test

// The store behind a real PgBouncer (internal/pgbouncer), in both of its
// pool modes that keep transactions whole. They need the pgbouncer binary:
// without it they are skipped, except under CI.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/storetest"
	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bouncedPool returns a pool connected to a fresh database through a
// PgBouncer in mode, sending queries in execMode, with the key store
// migrated through it, and the database's own URL.
func bouncedPool(t *testing.T, mode string, execMode pgx.QueryExecMode) (*pgxpool.Pool, string) {
	t.Helper()
	direct := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(pgbouncer.Start(t, mode, direct))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = execMode
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool, direct
}

// bouncedConformance runs the store conformance suite on stores whose
// every statement, the suite's own included, goes through PgBouncer.
func bouncedConformance(t *testing.T, mode string, execMode pgx.QueryExecMode, opts pgstore.Options) {
	storetest.Run(t, func(t *testing.T) storetest.Harness[pgx.Tx] {
		pool, _ := bouncedPool(t, mode, execMode)
		store := pgstore.New(pool, opts)
		expire := func(column string) func(t *testing.T, id idem.ID) {
			return func(t *testing.T, id idem.ID) {
				_, err := pool.Exec(context.Background(),
					`UPDATE idempotency_keys SET `+column+` = now() - interval '1 second' WHERE scope = $1 AND operation = $2 AND key = $3`,
					id.Scope, id.Operation, id.Key)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		return storetest.Harness[pgx.Tx]{
			Store: store,
			Reap: func(t *testing.T) {
				if _, err := store.Reap(context.Background(), pgstore.ReapOptions{Logger: slog.New(slog.DiscardHandler)}); err != nil {
					t.Fatal(err)
				}
			},
			Expire:      expire("expires_at"),
			ExpireLease: expire("locked_until"),
		}
	})
}

// TestPgBouncerTransactionMode runs the conformance suite through a
// PgBouncer with pool_mode = transaction, told so (TransactionPooling).
//
// Such a pooler hands each transaction, and each statement outside one, to
// any free server session, and PgBouncer 1.18 does not carry prepared
// statements from one session to another, so pgx's default mode
// (QueryExecModeCacheStatement, which prepares each statement once per
// connection and reuses it) fails there with "prepared statement ... does
// not exist" or "already exists". The modes that prepare nothing named
// work: exec (an unnamed statement parsed, bound and run in one round
// trip, ended by one Sync, so it stays on one server session) and the
// simple protocol (arguments inlined as literals).
func TestPgBouncerTransactionMode(t *testing.T) {
	t.Parallel() // with the other conformance suites; see TestConformance
	for _, execMode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(execMode.String(), func(t *testing.T) {
			t.Parallel()
			bouncedConformance(t, pgbouncer.Transaction, execMode, pgstore.Options{TransactionPooling: true})
		})
	}
}

// TestPgBouncerSessionMode runs the conformance suite through a PgBouncer
// with pool_mode = session, with the store's and pgx's defaults: a client
// keeps its server session, so nothing needs to change.
func TestPgBouncerSessionMode(t *testing.T) {
	t.Parallel()
	bouncedConformance(t, pgbouncer.Session, pgx.QueryExecModeCacheStatement, pgstore.Options{})
}

// TestPgBouncerTransactionModeNotTold runs stores that were not told about
// the pooler (no TransactionPooling) through a PgBouncer in transaction
// mode. A lookup's claim is then a session's lock on whichever server
// session ran the lookup, and the attempt's statements may go to another.
// The store must notice when the claim's release misses, and no key may
// run twice, before or after it noticed.
func TestPgBouncerTransactionModeNotTold(t *testing.T) {
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}

	// A completed attempt whose claim was stranded: the store notices, the
	// response is stored, and the key replays while the stranded session
	// still holds its claim.
	t.Run("completed", func(t *testing.T) {
		b := newNotTold(t)
		resp, _ := b.strand(t, op, "stranded", nil)
		if resp == nil || resp.Status != http.StatusCreated || resp.Replayed {
			t.Fatalf("first = %+v, want a fresh 201", resp)
		}
		b.checkNoticed(t)
		for range 3 {
			if resp := b.serve(t, op, "stranded"); resp.Status != http.StatusCreated || !resp.Replayed {
				t.Fatalf("duplicate = %+v; want the replay", resp)
			}
		}
		b.release()
		runDuplicates(t, b.engine, b.pool, op, "after")
	})

	// An aborted attempt whose claim was stranded: its key reads as in use
	// while the stranded session holds the claim, rather than running
	// again; once PostgreSQL ends that session, idle for the lease, the
	// key runs, once.
	t.Run("aborted", func(t *testing.T) {
		// Long enough for the stranding attempt to end on a busy machine
		// before the stranded session times out.
		op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: 3 * time.Second}
		b := newNotTold(t)
		failed := errors.New("the handler failed")
		resp, stranded := b.strand(t, op, "stranded", failed)
		if resp != nil {
			t.Fatalf("first = %+v, want the handler's error", resp)
		}
		b.checkNoticed(t)
		b.release()
		for range 3 {
			if resp := b.serve(t, op, "stranded"); resp.Status != http.StatusConflict {
				t.Fatalf("duplicate = %+v; want 409", resp)
			}
		}
		// Watched on a direct connection: a statement through PgBouncer
		// could land on the stranded session and keep it from idling.
		waitFor(t, "the stranded session to end", func() bool {
			var n int
			err := b.direct.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, stranded).Scan(&n)
			return err == nil && n == 0
		})
		if resp := b.serve(t, op, "stranded"); resp.Status != http.StatusCreated || resp.Replayed {
			t.Fatalf("after the stranded session ended = %+v; want a fresh 201", resp)
		}
		if resp := b.serve(t, op, "stranded"); resp.Status != http.StatusCreated || !resp.Replayed {
			t.Fatalf("then = %+v; want the replay", resp)
		}
		if n := b.runs["stranded"]; n != 2 {
			t.Fatalf("the key ran %d times, want twice: the aborted attempt and the one after its session ended", n)
		}
		runDuplicates(t, b.engine, b.pool, op, "after")
	})

	// A store that has not noticed yet, under concurrent duplicates: its
	// claims and releases land on sessions as PgBouncer hands them out.
	t.Run("concurrent", func(t *testing.T) {
		b := newNotTold(t)
		runDuplicates(t, b.engine, b.pool, op, "concurrent")
		t.Logf("the store noticed the pooler: %v", b.noticed())
	})
}

// notTold is a store not told about the PgBouncer in transaction mode its
// pool goes through, on a database of its own.
type notTold struct {
	pool   *pgxpool.Pool
	direct *pgx.Conn // to the database, not through PgBouncer
	other  *pgx.Conn // another client of the same PgBouncer
	log    *errLog
	engine *idem.Engine[pgx.Tx]
	held   pgx.Tx         // other's transaction, holding a stranded session
	runs   map[string]int // handler runs of serve and strand, by key
}

func newNotTold(t *testing.T) *notTold {
	t.Helper()
	pool, url := bouncedPool(t, pgbouncer.Transaction, pgx.QueryExecModeExec)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE effects (key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	b := &notTold{pool: pool, log: &errLog{}, runs: map[string]int{}}
	b.engine = idem.NewEngine[pgx.Tx](pgstore.New(pool, pgstore.Options{Logger: slog.New(b.log)}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	connect := func(cfg *pgx.ConnConfig) *pgx.Conn {
		c, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	b.direct = connect(cfg)
	b.other = connect(pool.Config().ConnConfig.Copy())
	t.Cleanup(b.release)
	return b
}

// strand serves key with a handler that first opens a transaction on
// other: PgBouncer gives it the server session that was freed last, the
// one the lookup that claimed the key ran on, so the attempt's own
// statements go to another session, and the claim stays behind. It
// returns the response and the stranded session's pid; other's
// transaction holds that session until release.
func (b *notTold) strand(t *testing.T, op *idem.Operation, key string, handlerErr error) (*idem.Response, int32) {
	t.Helper()
	var stranded int32
	resp, err := b.engine.Serve(keyed(key), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		b.runs[key]++
		tx, err := b.other.Begin(ctx)
		if err != nil {
			return nil, err
		}
		b.held = tx
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&stranded); err != nil {
			return nil, err
		}
		var own int32
		if err := at.Tx().QueryRow(ctx, `INSERT INTO effects VALUES ($1) RETURNING pg_backend_pid()`, key).Scan(&own); err != nil {
			return nil, err
		}
		if stranded == own {
			return nil, fmt.Errorf("the attempt ran on session %d, the one other's transaction holds", own)
		}
		var locks int
		if err := at.Tx().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND granted`, stranded).Scan(&locks); err != nil {
			return nil, err
		}
		if locks != 1 {
			return nil, fmt.Errorf("session %d, the one freed last, holds %d advisory locks, want the lookup's claim", stranded, locks)
		}
		if handlerErr != nil {
			return nil, handlerErr
		}
		return created(`{"key":"` + key + `"}`), nil
	})
	if err != nil && !errors.Is(err, handlerErr) {
		t.Fatalf("Serve(%s): %v", key, err)
	}
	if b.held == nil {
		t.Fatalf("Serve(%s) = %+v, %v: the handler did not run", key, resp, err)
	}
	return resp, stranded
}

// serve serves key with a handler that counts its runs.
func (b *notTold) serve(t *testing.T, op *idem.Operation, key string) *idem.Response {
	t.Helper()
	resp, err := b.engine.Serve(keyed(key), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		b.runs[key]++
		if _, err := at.Tx().Exec(ctx, `INSERT INTO effects VALUES ($1)`, key); err != nil {
			return nil, err
		}
		return created(`{"key":"` + key + `"}`), nil
	})
	if err != nil {
		t.Fatalf("Serve(%s): %v", key, err)
	}
	return resp
}

// release ends other's transaction, freeing the stranded session for
// PgBouncer to hand out again.
func (b *notTold) release() {
	if b.held != nil {
		_ = b.held.Rollback(context.Background())
		b.held = nil
	}
}

func (b *notTold) noticed() bool { return slicesContain(b.log.errors(), "TransactionPooling") }

func (b *notTold) checkNoticed(t *testing.T) {
	t.Helper()
	if !b.noticed() {
		t.Fatalf("logged errors %q, want one naming Options.TransactionPooling", b.log.errors())
	}
}

// runDuplicates sends rounds of concurrent duplicates of a few keys
// through e, each attempt counting its run in memory, as a call to
// another service would, and in its transaction. Every key must run
// exactly once and every answer be its response or a 409.
func runDuplicates(t *testing.T, e *idem.Engine[pgx.Tx], pool *pgxpool.Pool, op *idem.Operation, prefix string) {
	t.Helper()
	const rounds, keys, duplicates = 3, 4, 6
	var (
		mu      sync.Mutex
		runs    = map[string]int{}
		bodies  = map[string]map[string]bool{}
		answers = map[int]int{}
		errs    []error
	)
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for k := range keys {
			key := fmt.Sprintf("%s-%d-%d", prefix, round, k)
			for range duplicates {
				wg.Go(func() {
					<-start
					resp, err := e.Serve(keyed(key), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
						mu.Lock()
						runs[key]++
						run := runs[key]
						mu.Unlock()
						// Work that takes a while, for duplicates to arrive
						// during it.
						if _, err := at.Tx().Exec(ctx, `INSERT INTO effects SELECT $1 FROM pg_sleep(0.02)`, key); err != nil {
							return nil, err
						}
						return created(fmt.Sprintf(`{"key":%q,"run":%d}`, key, run)), nil
					})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", key, err))
						return
					}
					answers[resp.Status]++
					if resp.Status == http.StatusCreated {
						if bodies[key] == nil {
							bodies[key] = map[string]bool{}
						}
						bodies[key][string(resp.Body)] = true
					}
				})
			}
		}
		close(start)
		wg.Wait()
	}
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if answers[http.StatusCreated]+answers[http.StatusConflict] != rounds*keys*duplicates {
		t.Errorf("answers by status %v, want only 201s and 409s", answers)
	}
	var stored []string
	rows, _ := pool.Query(context.Background(), `SELECT key FROM effects WHERE key LIKE $1 || '-%' ORDER BY key`, prefix)
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != rounds*keys {
		t.Errorf("committed effects %v, want one per key (%d)", stored, rounds*keys)
	}
	for round := range rounds {
		for k := range keys {
			key := fmt.Sprintf("%s-%d-%d", prefix, round, k)
			if runs[key] != 1 || len(bodies[key]) != 1 {
				t.Errorf("%s ran %d times and answered %d distinct 201 bodies, want 1 and 1", key, runs[key], len(bodies[key]))
			}
		}
	}
	if t.Failed() {
		t.Logf("answers by status: %v", answers)
	}
}
