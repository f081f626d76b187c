package pgtest_test

import (
	"context"
	"crypto/rand"
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
	pgtest.Settle()

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

// dirtySQL leaves behind what tests can: objects of most kinds, in public
// and in a schema of their own, settings, and objects outside schemas.
const dirtySQL = `
CREATE TABLE t (id serial PRIMARY KEY, v text UNIQUE);
INSERT INTO t (v) VALUES ('a');
CREATE INDEX ON t (lower(v));
COMMENT ON TABLE t IS 'left behind';
CREATE VIEW v AS SELECT * FROM t;
CREATE MATERIALIZED VIEW mv AS SELECT * FROM t;
CREATE SEQUENCE s;
CREATE TYPE mood AS ENUM ('ok');
CREATE TYPE pair AS (a int, b int);
CREATE CAST (pair AS text) WITH INOUT;
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE PROCEDURE p() LANGUAGE plpgsql AS $$BEGIN END$$;
CREATE FUNCTION trg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER tt BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION trg();
CREATE POLICY pol ON t USING (true);
CREATE STATISTICS st ON id, v FROM t;
CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq);
CREATE TEXT SEARCH CONFIGURATION ts (COPY = simple);
CREATE COLLATION coll (locale = 'C');
CREATE TYPE fr AS RANGE (subtype = float8);
CREATE TABLE pt (id int) PARTITION BY RANGE (id);
CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (10);
CREATE TEXT SEARCH DICTIONARY tsd (TEMPLATE = simple);
CREATE CONVERSION conv FOR 'LATIN1' TO 'UTF8' FROM iso8859_1_to_utf8;
CREATE SCHEMA other;
CREATE TABLE other.t2 (x int);
CREATE AGGREGATE other.total(int) (SFUNC = int4pl, STYPE = int);
SET client_min_messages = error; -- wal_level may be too low to publish
CREATE PUBLICATION pub FOR TABLE t;
SELECT lo_create(0);
DO $$
BEGIN
	EXECUTE format('ALTER DATABASE %I SET work_mem = %L', current_database(), '8MB');
	EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET statement_timeout = %L', current_database(), '1min');
	IF EXISTS (SELECT FROM pg_available_extensions WHERE name = 'hstore') THEN
		CREATE EXTENSION hstore;
	END IF;
END $$;
`

// superuserSQL is the part of dirtySQL only a superuser may run.
const superuserSQL = `
CREATE OPERATOR CLASS opc FOR TYPE int USING btree AS OPERATOR 1 <, FUNCTION 1 btint4cmp(int, int);
CREATE FUNCTION evt() RETURNS event_trigger LANGUAGE plpgsql AS $$BEGIN END$$;
CREATE EVENT TRIGGER et ON ddl_command_start EXECUTE FUNCTION evt();
CREATE FOREIGN DATA WRAPPER fdw;
CREATE SERVER srv FOREIGN DATA WRAPPER fdw;
CREATE USER MAPPING FOR CURRENT_USER SERVER srv;
CREATE FOREIGN TABLE ft (x int) SERVER srv;
`

// describe lists what a database holds, in terms independent of OIDs and
// of its name.
func describe(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	rows, err := c.Query(t.Context(), `
		SELECT format('SELECT %L || '' '' || count(*) FROM pg_catalog.%I', c.relname, c.relname)
		FROM pg_class c
		WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
		  AND c.relname NOT IN ('pg_statistic', 'pg_largeobject') -- autovacuum's, and held in pg_largeobject_metadata
		ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	queries = append(queries,
		`SELECT string_agg(format('schema %s owner %s acl %s comment %s', nspname, nspowner::regrole, nspacl, obj_description(oid, 'pg_namespace')), E'\n' ORDER BY nspname) FROM pg_namespace`,
		`SELECT format('database owner %s acl %s connlimit %s comment %s', datdba::regrole, datacl, datconnlimit, shobj_description(oid, 'pg_database')) FROM pg_database WHERE datname = current_database()`,
		`SELECT 'settings ' || count(*) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		`SELECT 'locks of other sessions ' || count(*) FROM pg_locks WHERE pid <> pg_backend_pid() AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		`SELECT 'work_mem ' || current_setting('work_mem') || ' statement_timeout ' || current_setting('statement_timeout')`,
	)
	var lines []string
	for _, q := range queries {
		var line string
		if err := c.QueryRow(t.Context(), q).Scan(&line); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func databaseOID(t *testing.T, c *pgx.Conn) uint32 {
	t.Helper()
	var oid uint32
	if err := c.QueryRow(t.Context(), `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	return oid
}

// TestReusedDatabaseIsFresh dirties a database, leaving a session on it,
// and checks that the next test it goes to finds it as template0 makes
// one, and that a database that cannot be reset so is not reused.
func TestReusedDatabaseIsFresh(t *testing.T) {
	var (
		dirtied uint32
		oldURL  string
	)
	t.Run("dirty", func(t *testing.T) {
		pgtest.Settle()
		oldURL = pgtest.NewDatabase(t)
		pgtest.Settle() // a spare made now must not be handed out next
		c := connect(t, oldURL)
		dirtied = databaseOID(t, c)
		if _, err := c.Exec(t.Context(), dirtySQL); err != nil {
			t.Fatal(err)
		}
		var super bool
		if err := c.QueryRow(t.Context(), `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
			t.Fatal(err)
		}
		if super {
			if _, err := c.Exec(t.Context(), superuserSQL); err != nil {
				t.Fatal(err)
			}
		}
		// Left open: its lock and temporary table must go with it.
		if _, err := c.Exec(t.Context(), `SELECT pg_advisory_lock(42); CREATE TEMP TABLE tmp (x int)`); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reused", func(t *testing.T) {
		pgtest.Settle() // the last database made free is the one just released
		c := connect(t, pgtest.NewDatabase(t))
		if got := databaseOID(t, c); got != dirtied {
			t.Fatalf("got database %d, not the one just released (%d): reuse is broken", got, dirtied)
		}
		if conn, err := pgx.Connect(t.Context(), oldURL); err == nil {
			conn.Close(context.Background())
			t.Error("the previous test's URL still connects")
		}

		// Compared with a database made here as before reuse.
		admin := connect(t, pgtest.AdminURL(t))
		name := "idemgen_test_fresh_" + rand.Text()
		ident := pgx.Identifier{name}.Sanitize()
		if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
				t.Error(err)
			}
		})
		freshURL, err := pgtest.WithDatabase(pgtest.AdminURL(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := describe(t, c), describe(t, connect(t, freshURL)); got != want {
			t.Errorf("reused database differs from a fresh one:\n%s\nwant:\n%s", got, want)
		}
	})

	// What the reset leaves alone, tests here do not change: a database
	// changed so is dropped rather than reused.
	for _, change := range []string{
		`DO $$ BEGIN EXECUTE format('COMMENT ON DATABASE %I IS %L', current_database(), 'kept'); END $$`,
		`GRANT CREATE ON SCHEMA public TO PUBLIC`,
		`ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC`,
	} {
		var changed uint32
		t.Run("unresettable", func(t *testing.T) {
			c := connect(t, pgtest.NewDatabase(t))
			changed = databaseOID(t, c)
			if _, err := c.Exec(t.Context(), change); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("not reused", func(t *testing.T) {
			pgtest.Settle()
			c := connect(t, pgtest.NewDatabase(t))
			if databaseOID(t, c) == changed {
				t.Fatalf("got the database changed by %s", change)
			}
			var left bool
			if err := c.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_database WHERE oid = $1)`, changed).Scan(&left); err != nil || left {
				t.Fatalf("database changed by %s still exists (%v)", change, err)
			}
		})
	}
}
