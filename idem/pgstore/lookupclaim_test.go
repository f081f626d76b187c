package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// advisoryLocks counts the advisory locks any session holds in the pool's
// database: none may outlive the attempt that took it. (pg_locks shows the
// whole cluster, where other tests run at the same time.)
func advisoryLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A lookup that finds the key free claims it: other lookups see it held,
// neither kind of claim can take it, and completing or aborting the
// attempt gives the lock back.
func TestLookupClaim(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Scope: "a", Operation: "createOrder", Key: "k"}

	rec, txn, err := s.LookupClaim(ctx, id, claim)
	if err != nil || txn == nil {
		t.Fatalf("LookupClaim of a free key = %+v, %v, %v; want a claim", rec, txn, err)
	}
	if rec, err := s.Lookup(ctx, id); err != nil || !rec.Held || rec.Found {
		t.Fatalf("Lookup of a claimed key = %+v, %v; want held, not found", rec, err)
	}
	if rec, other, err := s.LookupClaim(ctx, id, claim); err != nil || other != nil || !rec.Held {
		t.Fatalf("second LookupClaim = %+v, %v, %v; want held and no claim", rec, other, err)
	}
	if _, err := s.Claim(ctx, id, claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("Claim of a claimed key = %v, want ErrContended", err)
	}
	if err := txn.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after Abort, want 0", n)
	}

	_, txn, err = s.LookupClaim(ctx, id, claim)
	if err != nil || txn == nil {
		t.Fatalf("LookupClaim after Abort = %v, %v; want a claim", txn, err)
	}
	if err := txn.Complete(ctx, &idem.Response{Status: 201, Header: http.Header{"Location": {"/orders/1"}}, Body: []byte(`{"id":1}`)}); err != nil {
		t.Fatal(err)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after Complete, want 0", n)
	}
	rec, txn, err = s.LookupClaim(ctx, id, claim)
	if err != nil || txn != nil || !rec.Completed || rec.Generation != 1 || rec.Attempt != 1 ||
		rec.Response.Status != 201 || string(rec.Response.Body) != `{"id":1}` || rec.Response.Header.Get("Location") != "/orders/1" {
		t.Fatalf("LookupClaim of a completed key = %+v, %v, %v; want its stored response and no claim", rec, txn, err)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after a replay's lookup, want 0", n)
	}
}

// handlerStyle is one way a handler uses the attempt's pgx.Tx: each must
// join the transaction that commits with the key's row, whichever call
// comes first, since BEGIN rides with that first call.
type handlerStyle struct {
	name string
	run  func(ctx context.Context, tx pgx.Tx, key string) error
}

var handlerStyles = []handlerStyle{
	{"exec", func(ctx context.Context, tx pgx.Tx, key string) error {
		_, err := tx.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1)`, key)
		return err
	}},
	{"exec without arguments, two statements", func(ctx context.Context, tx pgx.Tx, key string) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO orders (key, n) VALUES ('%s', 1); INSERT INTO orders (key, n) VALUES ('%s', 2)`, key, key))
		return err
	}},
	{"exec with a query mode", func(ctx context.Context, tx pgx.Tx, key string) error {
		_, err := tx.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1)`, pgx.QueryExecModeExec, key)
		return err
	}},
	{"query row", func(ctx context.Context, tx pgx.Tx, key string) error {
		var id int
		if err := tx.QueryRow(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1) RETURNING id`, key).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE orders SET n = 2 WHERE id = $1`, id)
		return err
	}},
	{"query rows", func(ctx context.Context, tx pgx.Tx, key string) error {
		rows, _ := tx.Query(ctx, `INSERT INTO orders (key, n) SELECT $1, g FROM generate_series(1, 3) AS g RETURNING n`, key)
		ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err == nil && !slices.Equal(ns, []int{1, 2, 3}) {
			err = fmt.Errorf("RETURNING gave %v", ns)
		}
		return err
	}},
	{"query row of nothing", func(ctx context.Context, tx pgx.Tx, key string) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT n FROM orders WHERE key = $1`, key).Scan(&n); !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("QueryRow of no row = %v, want pgx.ErrNoRows", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1)`, key)
		return err
	}},
	{"batch", func(ctx context.Context, tx pgx.Tx, key string) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO orders (key, n) VALUES ($1, 1)`, key)
		b.Queue(`INSERT INTO orders (key, n) VALUES ($1, 2)`, key)
		return tx.SendBatch(ctx, b).Close()
	}},
	{"copy", func(ctx context.Context, tx pgx.Tx, key string) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"key", "n"}, pgx.CopyFromRows([][]any{{key, 1}, {key, 2}}))
		return err
	}},
	{"savepoints", func(ctx context.Context, tx pgx.Tx, key string) error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 99)`, key); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1)`, key)
			return err
		})
	}},
	{"statement then savepoint", func(ctx context.Context, tx pgx.Tx, key string) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 1)`, key); err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, 2)`, key)
			return err
		})
	}},
	{"large object", func(ctx context.Context, tx pgx.Tx, key string) error {
		lo := tx.LargeObjects()
		oid, err := lo.Create(ctx, 0)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO orders (key, n) VALUES ($1, $2)`, key, int64(oid))
		return err
	}},
	{"no statement", func(context.Context, pgx.Tx, string) error { return nil }},
}

// TestLookupClaimedHandlers runs a handler of each style through the
// engine, in each of pgx's query modes: its writes commit with the key's
// row when it answers, and roll back, freeing the key, when it fails.
func TestLookupClaimedHandlers(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			pool := newModePool(t, mode)
			if _, err := pool.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL, n bigint NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
			op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
			serve := func(key string, style handlerStyle, fail bool) (*idem.Response, error) {
				r := httptest.NewRequest("POST", "/orders", nil)
				r.Header.Set(idem.HeaderKey, key)
				return engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
					if err := style.run(ctx, at.Tx(), at.Key()); err != nil {
						return nil, fmt.Errorf("%s: %w", style.name, err)
					}
					if fail {
						return nil, errors.New("the handler fails after its writes")
					}
					return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
				})
			}
			count := func(key string) int {
				var n int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE key = $1`, key).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for i, style := range handlerStyles {
				key := fmt.Sprintf("k%d", i)
				if _, err := serve(key, style, true); err == nil || count(key) != 0 {
					t.Errorf("%s: a failing handler: error %v, %d rows kept; want its error and none", style.name, err, count(key))
				}
				resp, err := serve(key, style, false)
				if err != nil || resp.Status != 201 || resp.Replayed {
					t.Fatalf("%s: retry after the failure = %+v, %v; want a first execution's 201", style.name, resp, err)
				}
				rows := count(key)
				if replay, err := serve(key, style, false); err != nil || !replay.Replayed || count(key) != rows {
					t.Errorf("%s: third request = %+v, %v, rows %d -> %d; want a replay that writes nothing", style.name, replay, err, rows, count(key))
				}
				if style.name != "no statement" && rows == 0 {
					t.Errorf("%s: the first execution's writes were not committed", style.name)
				}
				if n := advisoryLocks(t, pool); n != 0 {
					t.Errorf("%s: %d advisory locks held after the attempts, want 0", style.name, n)
				}
			}
		})
	}
}

// A handler that ignores a failed statement and answers anyway leaves an
// aborted transaction: nothing commits, the request fails, and the key is
// free again for a retry.
func TestLookupClaimedAbortedTransaction(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (key text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Operation: "createOrder", Key: "k"}
	_, txn, err := s.LookupClaim(ctx, id, claim)
	if err != nil || txn == nil {
		t.Fatalf("LookupClaim = %v, %v", txn, err)
	}
	if _, err := txn.Tx().Exec(ctx, `INSERT INTO orders VALUES ($1)`, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Tx().Exec(ctx, `INSERT INTO orders VALUES ($1)`, "k"); err == nil {
		t.Fatal("a duplicate insert succeeded")
	}
	if err := txn.Complete(ctx, &idem.Response{Status: 201}); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("Complete after a failed statement = %v, want pgx.ErrTxCommitRollback", err)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held, want 0", n)
	}
	rec, txn, err := s.LookupClaim(ctx, id, claim)
	if err != nil || txn == nil || rec.Found {
		t.Fatalf("LookupClaim after the rollback = %+v, %v, %v; want the key free", rec, txn, err)
	}
	_ = txn.Abort(ctx)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("orders = %d, %v; want none committed", n, err)
	}
}

// Many requests race for each of many keys, so that lookups read the key
// absent while its first attempt commits and lets go of the lock: each key
// runs its handler once, the others get 409 or the stored response.
func TestLookupClaimRaces(t *testing.T) {
	ctx := context.Background()
	pool := newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 16 })
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	const keys, racers = 100, 8
	var runs atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	for k := range keys {
		key := fmt.Sprintf("race-%d", k)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				r := httptest.NewRequest("POST", "/orders", nil)
				r.Header.Set(idem.HeaderKey, key)
				resp, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
					runs.Add(1)
					if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ($1)`, at.Key()); err != nil {
						return nil, err
					}
					return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					statuses[err.Error()]++
				case resp.Replayed:
					statuses["replayed"]++
				default:
					statuses[fmt.Sprint(resp.Status)]++
				}
			})
		}
		close(start)
		wg.Wait()
	}
	var rows, dup int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT key) FROM orders`).Scan(&rows, &dup); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != keys || rows != keys || dup != 0 {
		t.Fatalf("%d handler runs, %d orders (%d duplicates) for %d keys; want one each (answers: %v)", runs.Load(), rows, dup, keys, statuses)
	}
	if statuses["201"] != keys || statuses["201"]+statuses["409"]+statuses["replayed"] != keys*racers {
		t.Fatalf("answers %v: want %d first executions, the rest 409 or replayed", statuses, keys)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held after the races, want 0", n)
	}
	t.Logf("answers: %v", statuses)
}

// An attempt whose process stops talking to the database after its lookup
// claimed the key, before any statement of its handler, holds the key no
// longer than the lease: PostgreSQL ends its idle session, which frees the
// lock, and the attempt can no longer commit.
func TestLookupClaimIdleHolderIsEnded(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Operation: "createOrder", Key: "k"}
	short := claim
	short.Lease = time.Second
	_, stuck, err := s.LookupClaim(ctx, id, short)
	if err != nil || stuck == nil {
		t.Fatalf("LookupClaim = %v, %v", stuck, err)
	}
	// Another request polls until the key is free: PostgreSQL's idle
	// timeout, not this test, decides when.
	deadline := time.Now().Add(30 * time.Second)
	var next idem.Txn[pgx.Tx]
	for next == nil && time.Now().Before(deadline) {
		var rec idem.Record
		rec, next, err = s.LookupClaim(ctx, id, claim)
		if err != nil {
			t.Fatal(err)
		}
		if next == nil && !rec.Held {
			t.Fatalf("the key was neither held nor claimed: %+v", rec)
		}
	}
	if next == nil {
		t.Fatal("the idle holder's key was not freed within 30s")
	}
	if err := next.Complete(ctx, &idem.Response{Status: 201}); err != nil {
		t.Fatal(err)
	}
	// The store ended it for sitting idle past its lease: an overrun,
	// which the engine names, not an outage.
	if err := stuck.Complete(ctx, &idem.Response{Status: 500}); !errors.Is(err, idem.ErrLeaseOverrun) || errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("the ended attempt's Complete = %v, want ErrLeaseOverrun", err)
	}
	if rec, err := s.Lookup(ctx, id); err != nil || rec.Response == nil || rec.Response.Status != 201 {
		t.Fatalf("stored response = %+v, %v; want the second attempt's 201", rec, err)
	}
}

// A handler whose first query cannot begin the transaction, its session
// gone, reads the error from the rows, as pgx lets callers do, and the
// attempt ends as one whose database went away.
func TestLookupClaimedQueryOnLostSession(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{})
	_, txn, err := s.LookupClaim(ctx, idem.ID{Operation: "createOrder", Key: "k"}, claim)
	if err != nil || txn == nil {
		t.Fatalf("LookupClaim = %v, %v", txn, err)
	}
	pid := txn.Tx().Conn().PgConn().PID()
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid); err != nil { // waits until it has ended
		t.Fatal(err)
	}
	for _, mode := range []any{pgx.QueryExecModeExec, nil} {
		args := []any{}
		if mode != nil {
			args = append(args, mode)
		}
		rows, _ := txn.Tx().Query(ctx, `SELECT 1`, args...)
		if _, err := pgx.CollectRows(rows, pgx.RowTo[int]); err == nil {
			t.Fatalf("a query on a terminated session (options %v) succeeded", args)
		}
	}
	if err := txn.Abort(ctx); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("Abort = %v, want ErrStoreUnavailable", err)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held, want 0", n)
	}
}

// A lookup's claim bounds its session's idle timeouts while it holds the
// key, and ending it puts back the values the application set for its
// sessions (here in AfterConnect), whether the attempt completes (the
// claim handed over to its transaction) or fails (the claim released).
func TestClaimKeepsSessionSettings(t *testing.T) {
	ctx := context.Background()
	pool := newConfiguredPool(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 2
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `SET idle_session_timeout = '7min'; SET idle_in_transaction_session_timeout = '9min'`)
			return err
		}
	})
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: 30 * time.Second}
	settings := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var idle, inTx string
		if err := q.QueryRow(ctx, `SELECT current_setting('idle_session_timeout'), current_setting('idle_in_transaction_session_timeout')`).Scan(&idle, &inTx); err != nil {
			t.Fatal(err)
		}
		return idle + " " + inTx
	}
	for _, fail := range []bool{false, true} {
		var during string
		resp, err := e.Serve(keyed(fmt.Sprintf("k-%v", fail)), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			during = settings(at.Tx())
			if fail {
				return nil, errors.New("the handler failed")
			}
			return created("{}"), nil
		})
		if !fail && (err != nil || resp.Status != 201) {
			t.Fatalf("attempt: %+v, %v", resp, err)
		}
		if during == "7min 9min" {
			t.Errorf("fail %v: the claim left the session's idle timeouts unbounded while it held the key", fail)
		}
		// Every connection of the pool: the claim's and the other.
		conns := make([]*pgxpool.Conn, 0, 2)
		for range 2 {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			if got := settings(c); got != "7min 9min" {
				t.Errorf("fail %v: after the attempt a session's idle timeouts are %q, want the application's 7min 9min", fail, got)
			}
			c.Release()
		}
	}
}
