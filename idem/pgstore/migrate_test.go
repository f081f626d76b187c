package pgstore_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5/pgxpool"
)

// versions reads the recorded migrations, version to how often.
func versions(t *testing.T, pool *pgxpool.Pool) map[int]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version, count(*) FROM idemgen_schema_migrations GROUP BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int]int{}
	for rows.Next() {
		var v, n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got[v] = n
	}
	return got
}

func wantAllOnce(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	got := versions(t, pool)
	if len(got) != len(ups) {
		t.Fatalf("recorded versions %v, want %d", got, len(ups))
	}
	for v, n := range got {
		if n != 1 {
			t.Errorf("version %d recorded %d times", v, n)
		}
	}
	if err := pgstore.Check(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
}

// Servers starting at once on a new database all migrate it, each
// migration runs once, and the application's own schema, run under the
// same lock, does not collide with itself.
func TestMigrateConcurrentStart(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const starts = 8
	var wg sync.WaitGroup
	errs := make([]error, starts)
	start := make(chan struct{})
	for i := range starts {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = pgstore.Migrate(context.Background(), pool, `CREATE TABLE IF NOT EXISTS app_things (id serial PRIMARY KEY)`)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("start %d: %v", i, err)
		}
	}
	check, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	wantAllOnce(t, check)
}

// A database the old, unversioned Migrate set up is brought under the
// version table; a second Migrate changes nothing.
func TestMigrateUpgradesAndRepeats(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	ups, _ := fs.Glob(schema.FS, "*.up.sql")
	for _, f := range ups {
		sql, _ := fs.ReadFile(schema.FS, f)
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (scope, operation, key, fingerprint, expires_at) VALUES ('s', 'o', 'k', 'fp', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := pgstore.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	wantAllOnce(t, pool)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d keys after the upgrade (%v), want the 1 kept", n, err)
	}
}

// A database migrated by newer code is refused, saying what to do.
func TestMigrateRefusesNewerDatabase(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	if _, err := pool.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name) VALUES (99, '0099_future')`); err != nil {
		t.Fatal(err)
	}
	err := pgstore.Migrate(ctx, pool)
	if !errors.Is(err, pgstore.ErrSchemaNewer) {
		t.Fatalf("Migrate = %v, want ErrSchemaNewer", err)
	}
	t.Log(err)
}

// A database migrated by newer code whose newer migrations declare this
// code's schema compatible is served as it is: the previous release
// starts beside the newer one, and after a rollback of the binaries.
func TestMigrateServesCompatibleNewerDatabase(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	known := len(ups)
	if _, err := pool.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name, compatible_from) VALUES (98, '0098_future', $1)`, known); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, pool, `CREATE TABLE IF NOT EXISTS app_things (id serial PRIMARY KEY)`); err != nil {
		t.Fatalf("Migrate on a database with a compatible newer migration: %v", err)
	}
	var app bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('app_things') IS NOT NULL`).Scan(&app); err != nil || !app {
		t.Fatalf("the application's script did not run (%v)", err)
	}
	// One newer migration that needs newer code is enough to refuse.
	if _, err := pool.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name, compatible_from) VALUES (99, '0099_future', 99)`); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, pool); !errors.Is(err, pgstore.ErrSchemaNewer) {
		t.Fatalf("Migrate = %v, want ErrSchemaNewer", err)
	} else if !strings.Contains(err.Error(), "0099_future") {
		t.Errorf("the error does not name the migration that needs newer code: %v", err)
	}
}
