package pgbouncer_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func backend(t *testing.T, c *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	if err := c.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// In transaction mode a client's statements go to whichever server
// session is free: the one a client's last statement ran on goes to the
// next transaction of any client (PgBouncer reuses the last freed first),
// and the client's next statement runs on another.
func TestTransactionMode(t *testing.T) {
	db := pgtest.NewDatabase(t)
	// pgx's default prepares statements on the session, which the next
	// transaction may not have (PgBouncer 1.18 does not track them).
	url := pgbouncer.Start(t, pgbouncer.Transaction, db) + "&default_query_exec_mode=exec"
	a, b := connect(t, url), connect(t, url)
	first := backend(t, a)
	tx, err := b.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var held int32
	if err := tx.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != first {
		t.Fatalf("client b's transaction ran on session %d, not on %d, which client a's statement left free", held, first)
	}
	if again := backend(t, a); again == held {
		t.Fatalf("client a ran on session %d, which client b's open transaction holds", again)
	}
	var name string
	if err := a.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil || name != database(t, db) {
		t.Fatalf("database %q, %v through PgBouncer; want the upstream's", name, err)
	}
}

// In session mode a client keeps its server session.
func TestSessionMode(t *testing.T) {
	url := pgbouncer.Start(t, pgbouncer.Session, pgtest.NewDatabase(t))
	a, b := connect(t, url), connect(t, url)
	first := backend(t, a)
	tx, err := b.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if again := backend(t, a); again != first {
		t.Fatalf("client a moved from session %d to %d", first, again)
	}
}

func database(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}
