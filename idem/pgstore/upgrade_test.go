package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// functionDefs reads the key store's functions as the database holds
// them, name to definition.
func functionDefs(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
		FROM pg_catalog.pg_proc AS p WHERE p.proname LIKE 'idemgen\_%' AND p.pronamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return defs
}

// schema/functions.sql holds the current definition of every function
// the migrations leave, and nothing else: applied over the migrations it
// changes no function and adds none.
func TestFunctionsFileIsCurrent(t *testing.T) {
	pool := newPool(t, nil)
	migrated := functionDefs(t, pool)
	if len(migrated) == 0 {
		t.Fatal("the migrations left no idemgen_ function")
	}
	file, err := os.ReadFile("../../schema/functions.sql")
	if err != nil {
		t.Fatal(err)
	}
	declared := regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION (\w+)\(`).FindAllStringSubmatch(string(file), -1)
	if len(declared) != len(migrated) {
		var names []string
		for n := range migrated {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Errorf("functions.sql defines %d functions, the migrations leave %d: %s", len(declared), len(migrated), strings.Join(names, ", "))
	}
	if _, err := pool.Exec(context.Background(), string(file)); err != nil {
		t.Fatalf("apply functions.sql: %v", err)
	}
	after := functionDefs(t, pool)
	for name, def := range after {
		if migrated[name] != def {
			t.Errorf("%s in functions.sql differs from the migrations' definition; copy the newest migration's definition whole:\nfunctions.sql:\n%s\nmigrations:\n%s", name, def, migrated[name])
		}
	}
}

// A row written by code that does not know the derived column (a release
// older than migration 0006 serving while it was applied) counts as
// derived: the reaper empties it rather than deleting it, so the key
// keeps its generation and its next use derives keys never sent before.
func TestOlderRowsKeepDerivedKeys(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	// As the older release's StoreResponse wrote it: no derived column.
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys
		(scope, operation, key, fingerprint, status, recovery_point, attempt, generation, response_status, response_headers, response_body, expires_at)
		VALUES ('acct_1', 'createPayment', 'k1', 'fp', 'completed', '', 1, 3, 201, '{}', 'paid', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	res, err := pgstore.New(pool, pgstore.Options{}).Reap(ctx, pgstore.ReapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Emptied != 1 || res.Deleted != 0 {
		t.Errorf("Reap = %+v, want the row emptied, not deleted", res)
	}
	var status string
	var generation int64
	err = pool.QueryRow(ctx, `SELECT status, generation FROM idempotency_keys WHERE scope = 'acct_1' AND key = 'k1'`).Scan(&status, &generation)
	if err != nil {
		t.Fatalf("the older release's row is gone after the reaper (%v): its key's next use would derive generation 1's keys again", err)
	}
	if status != "expired" || generation != 3 {
		t.Errorf("row status %q generation %d, want expired with generation 3 kept", status, generation)
	}
}

// Every migration rolls back and applies again: Down to 0 leaves no key
// store, Up rebuilds it, and Status reports each step.
func TestMigratorDownAndUp(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest := m.Latest()
	down, err := m.Down(ctx, latest-1)
	if err != nil || len(down) != 1 || down[0].Version != latest {
		t.Fatalf("Down(%d) = %+v, %v; want the newest migration rolled back", latest-1, down, err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := st[len(st)-1]; last.Version != latest || !last.Applied.IsZero() || !st[0].Known || st[0].Applied.IsZero() {
		t.Errorf("Status after one down: %+v", st)
	}
	down, err = m.Down(ctx, 0)
	if err != nil || len(down) != latest-1 {
		t.Fatalf("Down(0) = %d migrations, %v; want %d", len(down), err, latest-1)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class WHERE relname LIKE 'idempotency\_%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d key-store relations left after Down(0) (%v)", left, err)
	}
	up, err := m.Up(ctx, 0)
	if err != nil || len(up) != latest {
		t.Fatalf("Up = %d migrations, %v; want %d", len(up), err, latest)
	}
	wantAllOnce(t, pool)
	if again, err := m.Up(ctx, 0); err != nil || len(again) != 0 {
		t.Errorf("a second Up applied %d (%v), want none", len(again), err)
	}
	if _, err := m.Down(ctx, latest+1); err == nil {
		t.Error("Down to a migration this code does not know succeeded")
	}
}

// tableMigration is a migration that takes the key table's ACCESS
// EXCLUSIVE lock (0009 sets a column's default): the lock tests roll the
// database back to before it and apply it behind a busy table.
const tableMigration = 9

// busyKeyTable returns a pool on a database rolled back to before
// tableMigration, and a transaction that holds the key table (as a long
// report or a slow phase would) until the test rolls it back.
func busyKeyTable(ctx context.Context, t *testing.T) (*pgxpool.Pool, pgx.Tx) {
	t.Helper()
	pool := newPool(t, nil)
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Down(ctx, tableMigration-1); err != nil {
		t.Fatal(err)
	}
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	if _, err := blocker.Exec(ctx, `SELECT count(*) FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	return pool, blocker
}

// A migration that cannot take its lock within the lock timeout rolls
// back and tries again, and the requests queued behind it wait no longer
// than that timeout: a lookup of the key table, sent while the migration
// waits for its lock, answers while the transaction that blocks the
// migration is still open. Without the timeout it would wait for that
// transaction to end.
func TestMigratorWaitsForBusyTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, blocker := busyKeyTable(ctx, t)

	retries := make(chan struct{}, 100)
	const lockTimeout = 300 * time.Millisecond
	busy, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{LockTimeout: lockTimeout, Logger: signalOn(retries, "waits for a busy table")})
	if err != nil {
		t.Fatal(err)
	}
	var applied []pgstore.MigrationResult
	var upErr error
	var wg sync.WaitGroup
	wg.Go(func() { applied, upErr = busy.Up(ctx, 0) })
	pgtest.WaitForLockWait(ctx, t, pool, "ALTER TABLE idempotency_keys")
	// The migration waits for its lock; a lookup sent now queues behind it.
	start := time.Now()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil {
		t.Fatalf("a lookup behind the waiting migration: %v", err)
	}
	waited := time.Since(start)
	// Answered with the blocker still open: the lookup waited for the
	// migration's lock timeout, not for the blocker.
	<-retries
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if upErr != nil {
		t.Fatal(upErr)
	}
	if len(applied) == 0 || applied[0].Version != tableMigration || applied[0].Retries < 1 {
		t.Fatalf("Up = %+v, want migration %d applied after a retry", applied, tableMigration)
	}
	t.Logf("a lookup queued behind the migration waited %s (lock timeout %s); applied after %d retries", waited, lockTimeout, applied[0].Retries)
}

// A migration that never gets its lock fails with ErrMigrationLocked,
// having applied nothing.
func TestMigratorGivesUp(t *testing.T) {
	ctx := context.Background()
	pool, blocker := busyKeyTable(ctx, t)
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{LockTimeout: 50 * time.Millisecond, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := m.Up(ctx, 0)
	if !errors.Is(err, pgstore.ErrMigrationLocked) || len(applied) != 0 {
		t.Fatalf("Up = %+v, %v; want nothing applied and ErrMigrationLocked", applied, err)
	}
	blocker.Rollback(ctx)
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st[tableMigration-1].Applied.IsZero() {
		t.Error("the migration that gave up is recorded as applied")
	}
}

// signalOn is a logger that sends on c for each record whose message
// contains msg: a test signal rather than matching logs afterwards.
func signalOn(c chan<- struct{}, msg string) *slog.Logger {
	return slog.New(signalHandler{c, msg})
}

type signalHandler struct {
	c   chan<- struct{}
	msg string
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		h.c <- struct{}{}
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// Status reads a version table written before compatible_from existed
// without changing it.
func TestMigratorStatusOfAnOlderVersionTable(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	if _, err := pool.Exec(ctx, `ALTER TABLE idemgen_schema_migrations DROP COLUMN compatible_from`); err != nil {
		t.Fatal(err)
	}
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Applied.IsZero() {
			t.Errorf("Status reads %s as pending", s.Name)
		}
	}
	var has bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'idemgen_schema_migrations' AND column_name = 'compatible_from')`).Scan(&has); err != nil || has {
		t.Errorf("Status added compatible_from (%v)", err)
	}
	// Up adds it, and applies nothing.
	if done, err := m.Up(ctx, 0); err != nil || len(done) != 0 {
		t.Errorf("Up = %v, %v; want nothing applied", done, err)
	}
}

// Migrators started at once behind a busy table (servers of a new
// release starting together) all succeed once it frees, each migration
// applied and recorded once: a try that gave up on its lock leaves
// nothing for the next try to apply again.
func TestConcurrentMigratorsBehindBusyTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, blocker := busyKeyTable(ctx, t)
	retries := make(chan struct{}, 1000)
	const migrators = 3
	errs := make(chan error, migrators)
	for range migrators {
		mm, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{LockTimeout: 100 * time.Millisecond, Logger: signalOn(retries, "waits for a busy table")})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := mm.Up(ctx, 0)
			errs <- err
		}()
	}
	// Each try takes the migrators' lock in turn: wait until several
	// have given up on the table.
	for range migrators {
		select {
		case <-retries:
		case <-ctx.Done():
			t.Fatal("the migrators never waited for the busy table")
		}
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range migrators {
		if err := <-errs; err != nil {
			t.Errorf("a migrator: %v", err)
		}
	}
	wantAllOnce(t, pool)
}

// The replay filter's epoch only ever moves on: removing a completed key
// before its TTL moves it, by whichever release's forget or by hand, and a
// rollback of its migration and the upgrade after it keep it, or entries
// written before a forget would be read again.
func TestFilterEpochOutlivesRollback(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	epoch := func() int64 {
		t.Helper()
		var e int64
		if err := pool.QueryRow(ctx, `SELECT epoch FROM idemgen_filter_epoch`).Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	insert := func(key, expires string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys
			(scope, operation, key, fingerprint, status, recovery_point, attempt, generation, response_status, response_headers, response_body, expires_at)
			VALUES ('a', 'createOrder', $1, 'fp', 'completed', '', 1, 1, 201, '{}', 'x', now() + $2::interval)`, key, expires); err != nil {
			t.Fatal(err)
		}
	}
	start := epoch()
	insert("live", "1 hour")
	insert("expired", "-1 second")
	if _, err := pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = 'expired'`); err != nil {
		t.Fatal(err)
	}
	if e := epoch(); e != start {
		t.Fatalf("removing an expired key moved the epoch from %d to %d; the reaper must not", start, e)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = 'live'`); err != nil {
		t.Fatal(err)
	}
	moved := epoch()
	if moved <= start {
		t.Fatalf("removing a completed key within its TTL left the epoch at %d", moved)
	}
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Down(ctx, m.Latest()-1); err != nil {
		t.Fatal(err)
	}
	insert("rolled-back", "1 hour")
	if _, err := pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE key = 'rolled-back'`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if e := epoch(); e <= moved {
		t.Fatalf("after a forget during a rollback and the upgrade again, the epoch is %d, not past %d", e, moved)
	}
}

// The emptied rows' index (migration 0012) is built CONCURRENTLY, outside
// a transaction: while an open transaction that wrote to the key table
// keeps the build waiting, other writes to the table go on; a migrator
// started meanwhile waits its turn; and the build ends with the
// transaction. A build cut short, which leaves an index of that name
// behind, is built again whole.
func TestIndexBuildLetsWritesGoOn(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	pool := newPool(t, nil)
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const index = 12
	for round, leftover := range []bool{false, true} {
		if _, err := m.Down(ctx, index-1); err != nil {
			t.Fatal(err)
		}
		waiting := "CREATE INDEX CONCURRENTLY"
		if leftover {
			// What a build cut short leaves: an index of the name, not the
			// one the migration builds. Its drop waits first.
			if _, err := pool.Exec(ctx, `CREATE INDEX idempotency_keys_emptied_idx ON idempotency_keys (created_at)`); err != nil {
				t.Fatal(err)
			}
			waiting = "DROP INDEX CONCURRENTLY"
		}
		buildWhileWriting(ctx, t, pool, m, waiting, round)
	}
}

// buildWhileWriting applies the migrations with a transaction that wrote
// to the key table open, checks that the statement waiting waits for it
// while other writes and migrators go on, and that the index is built.
func buildWhileWriting(ctx context.Context, t *testing.T, pool *pgxpool.Pool, m *pgstore.Migrator, waiting string, round int) {
	t.Helper()
	insert := func(ctx context.Context, q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, key string) error {
		_, err := q.Exec(ctx, `INSERT INTO idempotency_keys (scope, operation, key, fingerprint, expires_at) VALUES ('s', 'o', $1, 'fp', now() + interval '1 hour')`, key)
		return err
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if err := insert(ctx, holder, fmt.Sprint("held", round)); err != nil {
		t.Fatal(err)
	}

	built := make(chan error, 2)
	go func() { _, err := m.Up(ctx, 0); built <- err }()
	// Wait until the build waits for the holder's transaction.
	for {
		var waits bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%' || $1 || '%' AND wait_event_type = 'Lock')`, waiting).Scan(&waits)
		if err != nil {
			t.Fatal(err)
		}
		if waits {
			break
		}
		select {
		case err := <-built:
			t.Fatalf("the index was built (%v) while a transaction that wrote to the table was open", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A write meanwhile is not held up by the build.
	if err := insert(ctx, pool, fmt.Sprint("meanwhile", round)); err != nil {
		t.Fatalf("a write while the index builds: %v", err)
	}
	// Nor is a second migrator's start; it waits its turn.
	other, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := other.Up(ctx, 0); built <- err }()
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-built; err != nil {
			t.Fatalf("Up: %v", err)
		}
	}
	var def string
	var valid bool
	err = pool.QueryRow(ctx, `SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index AS i
		WHERE i.indexrelid = 'idempotency_keys_emptied_idx'::regclass`).Scan(&def, &valid)
	if err != nil {
		t.Fatal(err)
	}
	if !valid || !strings.Contains(def, "(expires_at) WHERE (status = 'expired'::text)") {
		t.Errorf("the index after Up is %q (valid %v), want the emptied rows' by expires_at", def, valid)
	}
	wantAllOnce(t, pool)
}
