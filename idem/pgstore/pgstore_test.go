package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/storetest"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newPool returns a pool on a fresh database with the key store migrated.
func newPool(t *testing.T, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	return newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tracer })
}

// newModePool is newPool with queries sent in mode.
func newModePool(t *testing.T, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	return newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
}

func newConfiguredPool(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewMigratedDatabase(t, "key store", migrateKeyStore))
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// A connection made now, as a pool that migrated would have one: a
	// test with a short acquire bound then measures what it means to,
	// not how long a loaded machine takes to connect.
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool
}

// migrateKeyStore migrates the key store in the database at url.
func migrateKeyStore(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return pgstore.Migrate(ctx, conn)
}

// TestConformance runs the store conformance suite in each of pgx's query
// modes: the default statement cache, and the exec and simple-protocol
// modes that teams behind a transaction-pooling PgBouncer use, where the
// claim sent with BEGIN and the batch with COMMIT must work as well.
//
// The suites, each on databases of their own, run in parallel with each
// other and with those through PgBouncer, once the package's other tests,
// some of which time leases, have run alone.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			conformance(t, mode)
		})
	}
}

// A request that reuses a key after a failed attempt derives keys of its
// own with DerivedKeysPerRequest, on PostgreSQL (the conformance suite
// runs it in every query mode too).
func TestDerivedKeyDiffersPerRequest(t *testing.T) {
	t.Parallel()
	storetest.DerivedKeyDiffersPerRequest(t, func(t *testing.T) storetest.Harness[pgx.Tx] {
		return harness(t, pgx.QueryExecModeCacheStatement)
	})
}

func conformance(t *testing.T, mode pgx.QueryExecMode) {
	storetest.Run(t, func(t *testing.T) storetest.Harness[pgx.Tx] { return harness(t, mode) })
}

// harness is a store on a new database whose queries go in mode.
func harness(t *testing.T, mode pgx.QueryExecMode) storetest.Harness[pgx.Tx] {
	pool := newModePool(t, mode)
	store := pgstore.New(pool, pgstore.Options{})
	return storetest.Harness[pgx.Tx]{
		Store: store,
		Reap: func(t *testing.T) {
			if _, err := store.Reap(context.Background(), pgstore.ReapOptions{Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Fatal(err)
			}
		},
		Expire: func(t *testing.T, id idem.ID) {
			_, err := pool.Exec(context.Background(),
				`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE scope = $1 AND operation = $2 AND key = $3`,
				id.Scope, id.Operation, id.Key)
			if err != nil {
				t.Fatal(err)
			}
		},
		ExpireLease: func(t *testing.T, id idem.ID) {
			_, err := pool.Exec(context.Background(),
				`UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE scope = $1 AND operation = $2 AND key = $3`,
				id.Scope, id.Operation, id.Key)
			if err != nil {
				t.Fatal(err)
			}
		},
	}
}

func TestMigrateTwice(t *testing.T) {
	pool := newPool(t, nil)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
}

var claim = idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute}

// The handler's writes commit with the response and roll back with an abort.
func TestAttemptWritesAreAtomicWithResponse(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Scope: "a", Operation: "createOrder", Key: "k"}

	txn, err := s.Claim(ctx, id, claim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Tx().Exec(ctx, `INSERT INTO orders VALUES ('aborted')`); err != nil {
		t.Fatal(err)
	}
	if err := txn.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	txn, err = s.Claim(ctx, id, claim)
	if err != nil {
		t.Fatalf("claim after abort: %v", err)
	}
	if _, err := txn.Tx().Exec(ctx, `INSERT INTO orders VALUES ('kept')`); err != nil {
		t.Fatal(err)
	}
	if err := txn.Complete(ctx, &idem.Response{Status: 201, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, _ := pool.Query(ctx, `SELECT id FROM orders`)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "kept" {
		t.Fatalf("orders = %v, want only [kept]", ids)
	}
}

func TestHandlerCannotEndTheAttempt(t *testing.T) {
	ctx := context.Background()
	s := pgstore.New(newPool(t, nil), pgstore.Options{})
	txn, err := s.Claim(ctx, idem.ID{Key: "k"}, claim)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Abort(ctx)
	if err := txn.Tx().Commit(ctx); !errors.Is(err, pgstore.ErrOwnedTx) {
		t.Errorf("Commit = %v, want ErrOwnedTx", err)
	}
	if err := txn.Tx().Rollback(ctx); !errors.Is(err, pgstore.ErrOwnedTx) {
		t.Errorf("Rollback = %v, want ErrOwnedTx", err)
	}
	// Savepoints still work inside the attempt.
	sp, err := txn.Tx().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Commit(ctx); err != nil {
		t.Fatalf("release savepoint: %v", err)
	}
}

// A duplicate's lookup sees an uncommitted claim as busy without waiting
// for the claiming transaction. If it waited, it would hang until the
// context's deadline and fail with an error instead of answering.
func TestLookupDoesNotWaitForClaim(t *testing.T) {
	ctx := context.Background()
	s := pgstore.New(newPool(t, nil), pgstore.Options{})
	id := idem.ID{Scope: "a", Operation: "op", Key: "k"}
	txn, err := s.Claim(ctx, id, claim)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Abort(ctx)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec, err := s.Lookup(lctx, id)
	if err != nil || !rec.Held {
		t.Fatalf("Lookup during claim = %+v, %v; want held", rec, err)
	}
	if _, err := s.Claim(lctx, id, claim); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("second Claim = %v, want ErrContended", err)
	}
}

// A store whose database is gone fails every call with an error; the
// engine turns that into 503.
func TestStoreDown(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := pgstore.New(pool, pgstore.Options{})
	if _, err := s.Lookup(ctx, idem.ID{Key: "k"}); err == nil || !strings.Contains(err.Error(), "pgstore: lookup") || !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Errorf("Lookup on a dead server = %v, want a wrapped error that matches idem.ErrStoreUnavailable", err)
	}
	if _, err := s.Claim(ctx, idem.ID{Key: "k"}, claim); !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Errorf("Claim on a dead server = %v, want idem.ErrStoreUnavailable", err)
	}
}

// statements counts the statements a store sends, by their first word.
type statements struct {
	mu   sync.Mutex
	seen []string
}

// Each entry is one round trip: a query, several statements of one
// simple-protocol message, or a batch, their verbs joined by "+".
func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "idemgen_filter_epoch") {
		// The replay filter's epoch, read in the background every second
		// and once before a process's first lookup: no request's.
		return ctx
	}
	s.add(verbs(d.SQL))
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type batchKey struct{}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &[]string{})
}

func (s *statements) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if b, ok := ctx.Value(batchKey{}).(*[]string); ok {
		*b = append(*b, verbs(d.SQL))
	}
}

func (s *statements) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if b, ok := ctx.Value(batchKey{}).(*[]string); ok {
		s.add(strings.Join(*b, "+"))
	}
}

func (s *statements) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, v)
}

// verbs are the verbs of the statements in sql, joined by "+".
func verbs(sql string) string {
	var out []string
	for _, st := range strings.Split(sql, ";\n") {
		if w := firstWord(st); w != "" {
			out = append(out, strings.TrimSuffix(w, ";"))
		}
	}
	return strings.Join(out, "+")
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// firstWord is a statement's verb, past sqlc's "-- name:" comment lines.
func firstWord(sql string) string {
	for _, line := range strings.Split(sql, "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "--") {
			return strings.ToLower(f[0])
		}
	}
	return ""
}

// A claim that outlived its process (committed in flight, lease passed) is
// Abandoned: the next claim takes it over, keeping its recovery point, and
// only one of two racing claims wins it.
func TestAbandonedClaimIsTakenOverOnce(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Scope: "a", Operation: "createPayment", Key: "k"}
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys
		(scope, operation, key, fingerprint, status, locked_until, recovery_point, expires_at)
		VALUES ($1, $2, $3, 'fp', 'in_flight', now() - interval '1 second', 'charge_created', now() + interval '1 hour')`,
		id.Scope, id.Operation, id.Key); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Lookup(ctx, id)
	if err != nil || !rec.Found || rec.Completed || rec.Held || rec.LeaseLeft > 0 || rec.RecoveryPoint != "charge_created" || string(rec.Fingerprint) != "fp" {
		t.Fatalf("Lookup = %+v, %v; want in flight at charge_created with no lease left", rec, err)
	}
	if _, err := s.Claim(ctx, id, idem.Claim{Fingerprint: []byte("other"), TTL: time.Hour, Lease: time.Minute, Attempt: rec.Attempt}); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("a new generation over an attempt in flight = %v, want ErrContended", err)
	}
	takeover := idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute, Attempt: rec.Attempt, Takeover: true}

	var (
		wg   sync.WaitGroup
		won  = make(chan idem.Txn[pgx.Tx], 2)
		lost = make(chan error, 2)
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			txn, err := s.Claim(ctx, id, takeover)
			if err != nil {
				lost <- err
				return
			}
			won <- txn
		}()
	}
	wg.Wait()
	close(won)
	close(lost)
	var winners []idem.Txn[pgx.Tx]
	for txn := range won {
		winners = append(winners, txn)
	}
	if len(winners) != 1 {
		t.Fatalf("%d claims took over the abandoned key, want 1", len(winners))
	}
	if err := <-lost; !errors.Is(err, idem.ErrContended) {
		t.Fatalf("losing claim = %v, want ErrContended", err)
	}
	if rec, _ := s.Lookup(ctx, id); !rec.Held {
		t.Fatalf("during the takeover: %+v, want held", rec)
	}
	if err := winners[0].Complete(ctx, &idem.Response{Status: 201, Header: http.Header{}, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	var point string
	if err := pool.QueryRow(ctx, `SELECT recovery_point FROM idempotency_keys WHERE key = 'k'`).Scan(&point); err != nil || point != "charge_created" {
		t.Fatalf("recovery point after takeover = %q, %v; want kept", point, err)
	}
}

// A handler whose write fails because the database connection died gets
// the store's 503 and Retry-After, not a 500; the key is left free for the
// retry. Other handler errors stay errors, for a 500.
func TestHandlerLosingTheDatabaseIs503(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"a"}}
	serve := func(key string, phased bool, fail func(at *idem.Attempt[pgx.Tx]) error) (*idem.Response, error) {
		r, _ := http.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, key)
		ctx := idem.WithRequest(ctx, r)
		ok := func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }
		if phased {
			return e.ServePhased(ctx, op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
				if err := fail(at); err != nil {
					return "", nil, err
				}
				return "", ok, nil
			})
		}
		return e.Serve(ctx, op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			if err := fail(at); err != nil {
				return nil, err
			}
			return ok, nil
		})
	}
	killConn := func(at *idem.Attempt[pgx.Tx]) error {
		_, err := at.Tx().Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
		if err == nil {
			return errors.New("the connection survived pg_terminate_backend")
		}
		return err
	}
	for _, phased := range []bool{false, true} {
		key := fmt.Sprintf("phased=%v", phased)
		resp, err := serve(key, phased, killConn)
		if err != nil || resp.Status != 503 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: connection killed in the handler: %+v, %v; want 503 with Retry-After", key, resp, err)
		}
		if strings.Contains(string(resp.Body), "terminat") {
			t.Errorf("%s: the 503 leaks the database error: %s", key, resp.Body)
		}
		// Should the phased lease's release have failed too, end the lease
		// as its expiry would.
		if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
		// Until the terminated backend has exited, its advisory lock still
		// holds the key: the client retries on 409 as told.
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err = serve(key, phased, func(*idem.Attempt[pgx.Tx]) error { return nil })
			if err != nil || resp.Status != 409 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil || resp.Status != 201 {
			t.Fatalf("%s: retry: %+v, %v", key, resp, err)
		}
	}
	if _, err := serve("other", false, func(*idem.Attempt[pgx.Tx]) error { return errors.New("business bug") }); err == nil || err.Error() != "business bug" {
		t.Fatalf("a handler's own error = %v, want it returned for a 500", err)
	}
}

// The claim travels with BEGIN as one simple-protocol message, its values
// quoted into it: a key and scope made of quotes, semicolons, comments,
// placeholders and backslashes are claimed, stored and read back as sent.
func TestClaimQuotesItsValues(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	s := pgstore.New(pool, pgstore.Options{})
	id := idem.ID{Scope: `o'brien'; DROP TABLE idempotency_keys; --`, Operation: "createOrder", Key: `k'$1\'' -- $2 /*`}
	txn, err := s.Claim(ctx, id, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Complete(ctx, &idem.Response{Status: 201, Header: http.Header{}, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Lookup(ctx, id)
	if err != nil || !rec.Completed || rec.Response.Status != 201 {
		t.Fatalf("Lookup(%q) = %+v, %v; want the stored 201", id, rec, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE scope = $1 AND key = $2`, id.Scope, id.Key).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows for the key as sent, %v; want 1", n, err)
	}
	// Claiming the completed key again is refused: the claim's quoted
	// values found the row that was stored.
	if _, err := s.Claim(ctx, id, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute}); !errors.Is(err, idem.ErrContended) {
		t.Fatalf("claim of a completed key = %v, want ErrContended", err)
	}
}
