package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5"
)

// buildTool builds a migration tool from the tools module (tools/go.mod),
// where it is a Go tool dependency: no download beyond Go modules.
func buildTool(t *testing.T, pkg string, tags string) string {
	t.Helper()
	root, err := filepath.Abs(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(pkg+"/x")))
	cmd := exec.Command("go", "build", "-tags", tags, "-o", bin, pkg)
	cmd.Dir = filepath.Join(root, "tools")
	// No cgo: the tools link drivers, such as SQLite's, that the tests never use.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func tableExists(t *testing.T, url, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// migrationToolsEnv, set, makes TestMigrationFormats build the migration
// tools and run them.
const migrationToolsEnv = "IDEMGEN_MIGRATION_TOOLS"

// TestMigrationFormats applies the key store's migrations, written by
// idemgen migrations next to a migration of the user's, with the real
// tool of each format: up, down to the user's migration, and up again.
func TestMigrationFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the migration tools")
	}
	// Building the four tools (dbmate's SQLite driver among them) is most
	// of this package's time from a cold build cache: .ci/run sets the
	// variable, and contributors may.
	if os.Getenv(migrationToolsEnv) == "" {
		const how = "set " + migrationToolsEnv + "=1 to build golang-migrate, goose, tern and dbmate and apply the key store's migrations with each, as .ci/run does"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI must run the migration tools: %s", migrationToolsEnv, how)
		}
		t.Skipf("%s is not set, so the migration tools are not built: %s", migrationToolsEnv, how)
	}
	for _, tc := range []struct {
		format, pkg, tags string
		user              map[string]string // the user's first migration, by file name
		up, down          func(bin, dir, url string) []string
		downs             int // how often down runs to reach the user's migration; 0 is once, -1 once per key-store migration
	}{
		{
			format: "golang-migrate", pkg: "github.com/golang-migrate/migrate/v4/cmd/migrate", tags: "postgres",
			user: map[string]string{"000001_users.up.sql": "CREATE TABLE users (id int);\n", "000001_users.down.sql": "DROP TABLE users;\n"},
			up:   func(bin, dir, url string) []string { return []string{bin, "-path", dir, "-database", url, "up"} },
			down: func(bin, dir, url string) []string { return []string{bin, "-path", dir, "-database", url, "goto", "1"} },
		},
		{
			format: "goose", pkg: "github.com/pressly/goose/v3/cmd/goose",
			user: map[string]string{"00001_users.sql": "-- +goose Up\nCREATE TABLE users (id int);\n-- +goose Down\nDROP TABLE users;\n"},
			up:   func(bin, dir, url string) []string { return []string{bin, "-dir", dir, "postgres", url, "up"} },
			down: func(bin, dir, url string) []string {
				return []string{bin, "-dir", dir, "postgres", url, "down-to", "1"}
			},
		},
		{
			format: "tern", pkg: "github.com/jackc/tern/v2",
			user: map[string]string{"001_users.sql": "CREATE TABLE users (id int);\n---- create above / drop below ----\nDROP TABLE users;\n"},
			up: func(bin, dir, url string) []string {
				return []string{bin, "migrate", "--migrations", dir, "--conn-string", url}
			},
			down: func(bin, dir, url string) []string {
				return []string{bin, "migrate", "--migrations", dir, "--conn-string", url, "--destination", "1"}
			},
		},
		{
			// dbmate rolls back one migration at a time, and its lib/pq
			// driver asks for TLS unless told not to.
			format: "dbmate", pkg: "github.com/amacneil/dbmate/v2",
			user: map[string]string{"20240101000000_users.sql": "-- migrate:up\nCREATE TABLE users (id int);\n-- migrate:down\nDROP TABLE users;\n"},
			up: func(bin, dir, url string) []string {
				return []string{bin, "--url", withSSLDisabled(url), "--migrations-dir", dir, "--no-dump-schema", "migrate"}
			},
			down: func(bin, dir, url string) []string {
				return []string{bin, "--url", withSSLDisabled(url), "--migrations-dir", dir, "--no-dump-schema", "rollback"}
			},
			downs: -1,
		},
	} {
		t.Run(tc.format, func(t *testing.T) {
			bin := buildTool(t, tc.pkg, tc.tags)
			url := pgtest.NewDatabase(t)
			dir := t.TempDir()
			for name, sql := range tc.user {
				write(t, filepath.Join(dir, name), sql)
			}
			var stderr bytes.Buffer
			if code := run([]string{"migrations", "-format", tc.format, "-dir", dir}, &stderr, &stderr); code != 0 {
				t.Fatalf("idemgen migrations: exit %d\n%s", code, stderr.String())
			}
			runTool := func(args []string) {
				t.Helper()
				out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(args[1:], " "), err, out)
				}
			}
			runTool(tc.up(bin, dir, url))
			if !tableExists(t, url, "idempotency_keys") || !tableExists(t, url, "idempotency_secret") || !tableExists(t, url, "users") {
				t.Fatal("after up: a table is missing")
			}
			// Built outside a transaction, as CONCURRENTLY must be: in one,
			// the tool would have failed.
			if !validIndex(t, url, "idempotency_keys_emptied_idx") {
				t.Fatal("after up: the emptied rows' index is missing or invalid")
			}
			downs := max(tc.downs, 1)
			if tc.downs < 0 {
				downs = keyStoreMigrations(t)
			}
			for range downs {
				runTool(tc.down(bin, dir, url))
			}
			if tableExists(t, url, "idempotency_keys") || !tableExists(t, url, "users") {
				t.Fatal("after down to the user's migration: the key table is still there, or the user's is gone")
			}
			runTool(tc.up(bin, dir, url))
			if !tableExists(t, url, "idempotency_keys") || !validIndex(t, url, "idempotency_keys_emptied_idx") {
				t.Fatal("after up again: no key table, or no valid emptied rows' index")
			}
		})
	}
}

// validIndex reports whether the index exists and is valid (a CREATE
// INDEX CONCURRENTLY that failed leaves an invalid one).
func validIndex(t *testing.T, url, index string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	err = conn.QueryRow(context.Background(), `SELECT coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)), false)`, index).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// withSSLDisabled adds sslmode=disable to a URL that sets no sslmode.
func withSSLDisabled(url string) string {
	if strings.Contains(url, "sslmode=") {
		return url
	}
	if strings.Contains(url, "?") {
		return url + "&sslmode=disable"
	}
	return url + "?sslmode=disable"
}

// keyStoreMigrations counts the key store's migrations.
func keyStoreMigrations(t *testing.T) int {
	t.Helper()
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no key-store migrations: %v", err)
	}
	return len(ups)
}
