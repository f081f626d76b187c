// Package pgtest gives tests their own empty PostgreSQL databases on a
// server found or started by pglocal.
//
// A package using it must have
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// so that a throwaway cluster started for the test binary is stopped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pglocal"
)

// One server per test binary, started on first use so packages whose tests
// never touch the database pay nothing.
var (
	serverOnce sync.Once
	server     *pglocal.Server
	serverErr  error

	// mainUsed records that Main will stop the server; without it a
	// throwaway cluster would outlive the test binary.
	mainUsed bool
)

// Main runs the tests, stops a cluster started for them, and exits with the
// tests' exit code.
func Main(m *testing.M) {
	mainUsed = true
	code := m.Run()
	if server != nil {
		if err := server.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

func adminURL(t testing.TB) string {
	t.Helper()
	if !mainUsed {
		// Required everywhere, not only where a cluster gets started, so a
		// missing TestMain shows up on every machine.
		t.Fatal("add `func TestMain(m *testing.M) { idemtest.Main(m) }` to this package's tests, so that a throwaway PostgreSQL cluster started for them gets stopped")
	}
	serverOnce.Do(func() {
		// Stderr output is only shown for failing packages or with -v,
		// which is when knowing the server's source helps.
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		server, serverErr = pglocal.Start(context.Background(), pglocal.Options{Logger: log})
	})
	if serverErr != nil {
		t.Fatalf("pgtest: no PostgreSQL server for tests: %v", serverErr)
	}
	return server.URL
}

// NewDatabase creates a fresh, empty database for this test and returns its
// URL. The database is dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)

	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails, per crypto/rand docs
	name := "idemgen_test_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{name}.Sanitize()

	// template0 guarantees an empty database even if template1 on a shared
	// server has been modified, and nobody can be connected to it, which
	// would make concurrent CREATE DATABASE calls fail.
	if err := adminExec(t.Context(), admin, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE ends connections the test left open.
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})

	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// NewPool returns a pool connected to a fresh database from NewDatabase.
// The pool is closed, then the database dropped, when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatalf("pgtest: creating pool: %v", err)
	}
	t.Cleanup(pool.Close)
	// pgxpool connects lazily; fail here rather than in the test body.
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatalf("pgtest: connecting pool: %v", err)
	}
	return pool
}

func adminExec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connecting to admin database: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns admin with its database replaced by name. admin may
// be a URL or, from DATABASE_URL, a keyword/value string.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("parsing server URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value strings a later keyword overrides an earlier one.
	return admin + " dbname=" + name, nil
}
