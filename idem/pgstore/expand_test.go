package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/upgrade"
)

// schemaShape is what older code relies on: each column's type,
// nullability and default, and each function's result, by name.
type schemaShape struct {
	columns   map[string]column // table.column
	functions map[string]string // signature -> result type
}

type column struct {
	dataType, nullable string
	hasDefault         bool
}

func shapeOf(t *testing.T, pool *pgxpool.Pool) schemaShape {
	t.Helper()
	ctx := context.Background()
	s := schemaShape{columns: map[string]column{}, functions: map[string]string{}}
	rows, err := pool.Query(ctx, `SELECT table_name || '.' || column_name, data_type, is_nullable, column_default IS NOT NULL
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name LIKE 'idempotency\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var c column
		if err := rows.Scan(&name, &c.dataType, &c.nullable, &c.hasDefault); err != nil {
			t.Fatal(err)
		}
		s.columns[name] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid)
		FROM pg_catalog.pg_proc AS p WHERE p.proname LIKE 'idemgen\_%' AND p.pronamespace = current_schema()::regnamespace`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sig, result string
		if err := rows.Scan(&sig, &result); err != nil {
			t.Fatal(err)
		}
		s.functions[sig] = result
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// The migrations since the previous release only expand the schema that
// release's code reads and writes (schema/README.md's rule): every column
// it knows keeps its type and stays nullable where it was, every function
// it calls keeps its signature and result, and a new column it does not
// know takes a default where it may not be NULL, since its inserts leave
// it out.
func TestMigrationsExpandOnly(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx, upgrade.PreviousMigration); err != nil {
		t.Fatal(err)
	}
	before := shapeOf(t, pool)
	if _, err := m.Up(ctx, 0); err != nil {
		t.Fatal(err)
	}
	after := shapeOf(t, pool)
	for name, old := range before.columns {
		now, ok := after.columns[name]
		switch {
		case !ok:
			t.Errorf("column %s, which %s reads and writes, is gone", name, upgrade.PreviousRelease)
		case now.dataType != old.dataType:
			t.Errorf("column %s changed type from %s to %s under %s's code", name, old.dataType, now.dataType, upgrade.PreviousRelease)
		case old.nullable == "YES" && now.nullable == "NO":
			t.Errorf("column %s became NOT NULL, and %s may write NULL to it", name, upgrade.PreviousRelease)
		}
	}
	for name, now := range after.columns {
		if _, ok := before.columns[name]; !ok && now.nullable == "NO" && !now.hasDefault {
			t.Errorf("new column %s is NOT NULL without a default: %s's inserts leave it out and fail", name, upgrade.PreviousRelease)
		}
	}
	for sig, result := range before.functions {
		if now, ok := after.functions[sig]; !ok {
			t.Errorf("function %s, which %s calls, is gone", sig, upgrade.PreviousRelease)
		} else if now != result {
			t.Errorf("function %s now returns %s, not %s", sig, now, result)
		}
	}
}
