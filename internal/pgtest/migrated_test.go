package pgtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// A database migrated for a kind of test comes back to the next test of
// that kind with the migration's rows and no others, unmigrated again;
// one whose schema or migration-written rows a test changed is reset and
// migrated anew, and a test of another kind never gets it.
func TestMigratedDatabaseReused(t *testing.T) {
	t.Parallel()
	migrations := 0
	migrate := func(ctx context.Context, url string) error {
		migrations++
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, `CREATE TABLE seed (v text);
			INSERT INTO seed VALUES ('first');
			CREATE TABLE data (id bigint PRIMARY KEY, v text);
			CREATE TABLE numbered (n bigint GENERATED ALWAYS AS IDENTITY, v text);
			CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
		return err
	}
	// Its own kind, which no earlier run of the test (-count) migrated.
	kind := fmt.Sprintf("%s %p", t.Name(), &migrations)
	// use runs a test of the kind that does change, and returns what the
	// next test of the kind finds.
	use := func(change string) (seed, data int) {
		t.Run("change", func(t *testing.T) {
			conn := connect(t, pgtest.NewMigratedDatabase(t, kind, migrate))
			if _, err := conn.Exec(t.Context(), change); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("next", func(t *testing.T) {
			conn := connect(t, pgtest.NewMigratedDatabase(t, kind, migrate))
			if err := conn.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM seed WHERE v = 'first'), (SELECT count(*) FROM data) + (SELECT count(*) FROM numbered)").Scan(&seed, &data); err != nil {
				t.Fatal(err)
			}
			// As after migrating: the identity starts again.
			var n int
			if err := conn.QueryRow(t.Context(), "INSERT INTO numbered (v) VALUES ('x') RETURNING n").Scan(&n); err != nil || n != 1 {
				t.Errorf("the first row numbered %d (%v), want 1", n, err)
			}
			var one int
			if err := conn.QueryRow(t.Context(), "SELECT f()").Scan(&one); err != nil || one != 1 {
				t.Errorf("f() = %d, %v after reuse", one, err)
			}
		})
		return seed, data
	}
	cases := []struct {
		change     string
		migrations int // in all, after the change's test and the next
	}{
		{"INSERT INTO data VALUES (1, 'a'), (2, 'b')", 1},
		{"INSERT INTO numbered (v) VALUES ('a'), ('b'); DELETE FROM numbered", 1},
		{"INSERT INTO data VALUES (3, 'c'); DELETE FROM data", 1},
		{"UPDATE seed SET v = 'changed'", 2},
		{"CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 2'", 3},
		{"ALTER TABLE data ADD COLUMN w int", 4},
		{"CREATE INDEX ON data (v)", 5},
		{"INSERT INTO data VALUES (4, 'd')", 5},
	}
	for _, c := range cases {
		seed, data := use(c.change)
		if seed != 1 || data != 0 {
			t.Errorf("after %q the next test found %d seed rows and %d data rows, want 1 and 0", c.change, seed, data)
		}
		if migrations != c.migrations {
			t.Errorf("after %q: %d migrations, want %d", c.change, migrations, c.migrations)
		}
	}
	t.Run("other kind", func(t *testing.T) {
		conn := connect(t, pgtest.NewMigratedDatabase(t, kind+" other", func(context.Context, string) error { return nil }))
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_class WHERE relname = 'seed'").Scan(&n); err != nil || n != 0 {
			t.Errorf("a test of another kind found the table seed (%d, %v)", n, err)
		}
	})
}
