package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A session that a pooler left holding a key's claim (the attempt's later
// statements went to other sessions) claims nothing more, and still reads
// that key as held; a release that reaches another session reports false.
// Advisory locks are re-entrant within a session, so without the guard
// such a session would hand the key to a second attempt.
func TestStrandedClaimGuard(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	a, b := connect(), connect()
	try := func(c *pgx.Conn, lock int64, key string) bool {
		t.Helper()
		var ok bool
		if err := c.QueryRow(ctx, `SELECT idemgen_try_claim($1, 60000, '', 'op', $2)`, lock, key).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	release := func(c *pgx.Conn, lock int64) bool {
		t.Helper()
		var ok bool
		if err := c.QueryRow(ctx, `SELECT idemgen_release_claim($1)`, lock).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !try(a, 1, "k1") {
		t.Fatal("a free key was not claimed")
	}
	if try(a, 1, "k1") || try(a, 2, "k2") {
		t.Fatal("a session holding a claim claimed again")
	}
	if try(b, 1, "k1") {
		t.Fatal("another session claimed a held key")
	}
	var held bool
	if err := a.QueryRow(ctx, `SELECT coalesce(current_setting('idemgen.claim', true), '') = '1'`).Scan(&held); err != nil || !held {
		t.Fatalf("the claiming session does not record its claim: %v, %v", held, err)
	}
	if _, err := a.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	_, err = a.Exec(ctx, `SELECT idemgen_claim(1, 60000, '', 'op', 'k1', 0, false)`)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "IG409" {
		t.Fatalf("a transaction claim of the key on the session holding it = %v, want IG409", err)
	}
	if _, err := a.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if release(b, 1) {
		t.Fatal("a session that did not claim the key released it")
	}
	if !release(a, 1) {
		t.Fatal("the claiming session could not release its claim")
	}
	if !try(b, 1, "k1") || !release(b, 1) {
		t.Fatal("the key was not free after its release")
	}
}
