package idemtest

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// The error check reads the tables before and after the run it makes
// fail, and names those the failed run changed, but those the request
// says it writes outside its attempt on purpose.
func TestErrorCheckFindsWritesOutsideTheAttempt(t *testing.T) {
	pool := NewPool(t, `
		CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, n int NOT NULL DEFAULT 0);
		CREATE SCHEMA IF NOT EXISTS audit;
		CREATE TABLE IF NOT EXISTS audit.log (entry text);
		CREATE TABLE IF NOT EXISTS untouched (x int);
		INSERT INTO orders (n) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM orders);`)
	exec := func(sql string) func() {
		return func() {
			if _, err := pool.Exec(context.Background(), sql); err != nil {
				t.Error(err)
			}
		}
	}
	tables := func(ctx context.Context) (*Tables, error) { return ReadTables(ctx, pool) }
	for _, tc := range []struct {
		name    string
		write   func()
		outside []string
		want    string // "" for no error
	}{
		{"none", nil, nil, ""},
		{"insert", exec(`INSERT INTO orders DEFAULT VALUES`), nil,
			"the handler wrote to table orders outside its attempt's transaction (at.Tx()); those writes survive a failed attempt and a retry repeats them: orders ("},
		// The row made with the table and the one the insert case's failed run left.
		{"update", exec(`UPDATE orders SET n = n + 1`), nil, "table orders outside its attempt's transaction (at.Tx()); those writes survive a failed attempt and a retry repeats them: orders (2 rows, some changed)"},
		{"two tables", exec(`INSERT INTO orders DEFAULT VALUES; INSERT INTO audit.log VALUES ('x')`), nil, "the handler wrote to tables audit.log and orders outside"},
		{"on purpose", exec(`INSERT INTO audit.log VALUES ('x')`), []string{"audit.log"}, ""},
		{"on purpose, public", exec(`DELETE FROM orders WHERE id = (SELECT max(id) FROM orders)`), []string{"public.orders"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{write: tc.write}
			srv := httptest.NewServer(f)
			defer srv.Close()
			req := orderRequest
			req.OutsideAttempt = tc.outside
			c := &client{url: srv.URL, req: req, http: srv.Client()}
			h := f.hooks()
			err := checkErrorReleasesKey(t.Context(), c, keyValues{NewKey()}, h.FailNext, h.Runs, tables)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("the check failed: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("the check returned %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// The key store's own tables are not the application's.
func TestReadTablesLeavesOutTheStore(t *testing.T) {
	pool := NewPool(t, `CREATE TABLE IF NOT EXISTS orders (id int)`)
	tables, err := ReadTables(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range tables.digests {
		names = append(names, name)
	}
	if len(names) != 1 || names[0] != "orders" {
		t.Fatalf("ReadTables read %v, want only orders", names)
	}
}
