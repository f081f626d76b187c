package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// idemgen migrate status, up and down on a database: what each prints,
// what each leaves recorded, and the mistakes it refuses with a usage
// error.
func TestMigrateCLI(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest := m.Latest()
	recorded := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM idemgen_schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	code, stdout, stderr := idemgen(t, "migrate", "status", "-database-url", url)
	if code != 0 || strings.Count(stdout, "pending") != latest || !strings.Contains(stderr, "pending; apply with idemgen migrate up") {
		t.Fatalf("status of an empty database: exit %d\n%s%s", code, stdout, stderr)
	}

	// Up to the previous migration, then the rest.
	code, stdout, stderr = idemgen(t, "migrate", "up", "-to", "1", "-database-url", url)
	if code != 0 || !strings.HasPrefix(stdout, "applied 0001_") || strings.Count(stdout, "applied ") != 1 || recorded() != 1 {
		t.Fatalf("up -to 1: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Setenv("DATABASE_URL", url) // as deployments pass it
	code, stdout, stderr = idemgen(t, "migrate", "up")
	if code != 0 || strings.Count(stdout, "applied ") != latest-1 || recorded() != latest || !strings.Contains(stderr, "applied") {
		t.Fatalf("up: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := pgstore.Check(ctx, pool); err != nil {
		t.Fatalf("Check after migrate up: %v", err)
	}
	code, stdout, stderr = idemgen(t, "migrate", "status")
	if code != 0 || strings.Contains(stdout, "pending") || !strings.Contains(stderr, "up to date") {
		t.Fatalf("status after up: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = idemgen(t, "migrate", "up")
	if code != 0 || stdout != "" {
		t.Errorf("a second up: exit %d, printed %q; want nothing applied", code, stdout)
	}

	// Down to the previous release's schema: the newest rolled back and
	// unrecorded, the version table's row included.
	code, stdout, stderr = idemgen(t, "migrate", "down", "-to", "8")
	if code != 0 || !strings.Contains(stdout, "rolled back 0009_") || recorded() != 8 {
		t.Fatalf("down -to 8: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = idemgen(t, "migrate", "status")
	if code != 0 || strings.Count(stdout, "pending") != latest-8 {
		t.Errorf("status after down: exit %d\n%s", code, stdout)
	}

	// A database migrated past what this code may serve.
	if _, err := pool.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name) VALUES (99, '0099_future')`); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = idemgen(t, "migrate", "status")
	if code != 0 || !strings.Contains(stdout, "0099_future") || !strings.Contains(stdout, "newer than this release") {
		t.Errorf("status of a newer database: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = idemgen(t, "migrate", "up")
	if code != 1 || !strings.Contains(stderr, "0099_future") || !strings.Contains(stderr, "migrate down") {
		t.Errorf("up on a newer database: exit %d, %s", code, stderr)
	}
	code, _, stderr = idemgen(t, "migrate", "down", "-to", "8")
	if code != 1 || !strings.Contains(stderr, "does not know") {
		t.Errorf("down past a migration this code does not know: exit %d, %s", code, stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate"}, "missing subcommand"},
		{[]string{"migrate", "sideways"}, `unknown subcommand "sideways"`},
		{[]string{"migrate", "down"}, "down needs -to"},
		{[]string{"migrate", "status", "-to", "3"}, "-to is a flag of up and down"},
		{[]string{"migrate", "up", "extra"}, "unexpected arguments"},
		{[]string{"migrate", "up", "-lock-timeout", "0s"}, "-lock-timeout must be above 0"},
	} {
		code, _, stderr := idemgen(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "idemgen migrate -h") {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	t.Setenv("DATABASE_URL", "")
	if code, _, stderr := idemgen(t, "migrate", "status"); code != 2 || !strings.Contains(stderr, "set DATABASE_URL or pass -database-url") {
		t.Errorf("no database: exit %d, %q", code, stderr)
	}
}

// idemgen migrate up -river applies River's migrations after the key
// store's, once; status -river lists them, pending then applied; down
// refuses -river.
func TestMigrateRiver(t *testing.T) {
	url := pgtest.NewDatabase(t)
	code, stdout, stderr := idemgen(t, "migrate", "status", "-river", "-database-url", url)
	if code != 0 || !strings.Contains(stdout, "RIVER MIGRATION") || !strings.Contains(stderr, "of River's pending; apply with idemgen migrate up -river") {
		t.Fatalf("status -river of an empty database: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = idemgen(t, "migrate", "up", "-river", "-database-url", url)
	if code != 0 || !strings.Contains(stdout, "applied 0001_") || !strings.Contains(stdout, "applied River's 001_") {
		t.Fatalf("up -river: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = idemgen(t, "migrate", "up", "-river", "-database-url", url)
	if code != 0 || strings.Contains(stdout, "applied") {
		t.Fatalf("up -river again: exit %d, applied something:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = idemgen(t, "migrate", "status", "-river", "-database-url", url)
	// A line that ends "pending" is a migration not applied (River names
	// one of its own "pending and more").
	if code != 0 || regexp.MustCompile(`(?m)pending$`).MatchString(stdout) || strings.Contains(stderr, "pending") {
		t.Fatalf("status -river after up: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = idemgen(t, "migrate", "down", "-to", "0", "-river", "-database-url", url)
	if code != 2 || !strings.Contains(stderr, "use River's own CLI") {
		t.Errorf("down -river: exit %d %s, want a usage error", code, stderr)
	}
}
