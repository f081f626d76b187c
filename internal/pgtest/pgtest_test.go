package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestNewDatabaseIsolatedAndDropped(t *testing.T) {
	var names []string
	t.Run("create", func(t *testing.T) {
		url1, url2 := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
		if url1 == url2 {
			t.Fatalf("both databases have URL %s", url1)
		}
		c1, c2 := connect(t, url1), connect(t, url2)

		for _, c := range []*pgx.Conn{c1, c2} {
			var name string
			var tables int
			err := c.QueryRow(t.Context(),
				`select current_database(),
				        (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace
				         where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast'))`).
				Scan(&name, &tables)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, "idemgen_test_") {
				t.Errorf("database name %q lacks the idemgen_test_ prefix", name)
			}
			if tables != 0 {
				t.Errorf("database %s is not empty: %d user relations", name, tables)
			}
			names = append(names, name)
		}
		if names[0] == names[1] {
			t.Fatalf("both URLs lead to database %s", names[0])
		}

		// A table made in one must not be visible in the other.
		if _, err := c1.Exec(t.Context(), "create table t (id int primary key); insert into t values (1)"); err != nil {
			t.Fatal(err)
		}
		var exists bool
		if err := c2.QueryRow(t.Context(), "select to_regclass('t') is not null").Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Error("table created in the first database is visible in the second")
		}
		// The connections stay open on purpose: cleanup must drop the
		// databases regardless.
	})
	if len(names) != 2 {
		t.Fatal("subtest did not create two databases")
	}

	admin := connect(t, pgtest.AdminURL(t))
	var left int
	if err := admin.QueryRow(t.Context(), "select count(*) from pg_database where datname = any($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of databases %v still exist after the subtest's cleanup", left, names)
	}
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var n int
	if err := pool.QueryRow(t.Context(), "select 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("select 1 = %d, %v", n, err)
	}
	if _, err := pool.Exec(t.Context(), "create table t (id int)"); err != nil {
		t.Fatal(err)
	}
}

func TestNewPoolParallel(t *testing.T) {
	t.Parallel()
	// Concurrent creation must not collide (e.g. on template locks).
	for range 4 {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			pool := pgtest.NewPool(t)
			if err := pool.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
