package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
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

// toolCase is a migration tool, as TestMigrationFormats runs it.
type toolCase struct {
	format, pkg, tags string
	user              map[string]string // the user's first migration, by file name
	up, down          func(bin, dir, url string) []string
	downs             int // how often down runs to reach the user's migration; 0 is once, -1 once per idemgen migration
}

// TestMigrationFormats applies the key store's migrations, written by
// idemgen migrations next to a migration of the user's, with the real
// tool of each format: up, down to the user's migration, and up again;
// then the same with River's migrations too (-river), which River's own
// migrator must find applied, and which must skip what River's migrator
// applied before them.
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
	for _, tc := range []toolCase{
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
			t.Run("key store", func(t *testing.T) { applyUpDownUp(t, tc, bin, false) })
			t.Run("with River", func(t *testing.T) { applyUpDownUp(t, tc, bin, true) })
			// River's migrator before 005 rebuilt river_migration with a
			// line column, after it, and to its last version (an async
			// service that used idemriver.Migrate before its folder had
			// River's files).
			for _, before := range []int{4, 6, 0} {
				name := fmt.Sprintf("after River's migrator to %03d", before)
				if before == 0 {
					name = "after River's migrator"
				}
				t.Run(name, func(t *testing.T) { applyAfterRiver(t, tc, bin, before) })
			}
			t.Run("beside River's migrator", func(t *testing.T) { applyBesideRiver(t, tc, bin) })
			if tc.format == "golang-migrate" {
				t.Run("the example's folder", func(t *testing.T) {
					url := pgtest.NewDatabase(t)
					runTool(t, tc.up(bin, filepath.Join(moduleRoot(t), "example", "gen", "migrations"), url))
					if !tableExists(t, url, "idempotency_keys") {
						t.Fatal("no key table")
					}
					riverWorks(t, url)
				})
			}
		})
	}
}

// writeFolder writes the user's migration and idemgen's (with -river,
// River's too) into a new folder, and returns it.
func writeFolder(t *testing.T, tc toolCase, river bool) string {
	t.Helper()
	dir := t.TempDir()
	for name, sql := range tc.user {
		write(t, filepath.Join(dir, name), sql)
	}
	args := []string{"migrations", "-format", tc.format, "-dir", dir}
	if river {
		args = append(args, "-river")
	}
	var stderr bytes.Buffer
	if code := run(args, &stderr, &stderr); code != 0 {
		t.Fatalf("idemgen migrations: exit %d\n%s", code, stderr.String())
	}
	return dir
}

// runTool runs a migration tool's command line.
func runTool(t *testing.T, args []string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args[1:], " "), err, out)
	}
}

// applyUpDownUp applies the folder with the tool on a new database: up,
// down to the user's migration, and up again.
func applyUpDownUp(t *testing.T, tc toolCase, bin string, river bool) {
	url := pgtest.NewDatabase(t)
	dir := writeFolder(t, tc, river)
	runTool(t, tc.up(bin, dir, url))
	if !tableExists(t, url, "idempotency_keys") || !tableExists(t, url, "idempotency_secret") || !tableExists(t, url, "users") {
		t.Fatal("after up: a table is missing")
	}
	// Built outside a transaction, as CONCURRENTLY must be: in one,
	// the tool would have failed.
	if !validIndex(t, url, "idempotency_keys_emptied_idx") {
		t.Fatal("after up: the emptied rows' index is missing or invalid")
	}
	if tableExists(t, url, "river_job") != river {
		t.Fatalf("after up: River's job table exists: %v, want %v", !river, river)
	}
	if river {
		riverWorks(t, url)
	}
	downs := max(tc.downs, 1)
	if tc.downs < 0 {
		downs = keyStoreMigrations(t)
		if river {
			downs += len(riverVersions(t))
		}
	}
	for range downs {
		runTool(t, tc.down(bin, dir, url))
	}
	if tableExists(t, url, "idempotency_keys") || !tableExists(t, url, "users") {
		t.Fatal("after down to the user's migration: the key table is still there, or the user's is gone")
	}
	if tableExists(t, url, "river_job") || tableExists(t, url, "river_migration") {
		t.Fatal("after down to the user's migration: River's tables are still there")
	}
	runTool(t, tc.up(bin, dir, url))
	if !tableExists(t, url, "idempotency_keys") || !validIndex(t, url, "idempotency_keys_emptied_idx") {
		t.Fatal("after up again: no key table, or no valid emptied rows' index")
	}
	if river {
		riverWorks(t, url)
	}
}

// applyAfterRiver applies the folder, River's files included, to a
// database where River's own migrator applied River's versions up to
// before (0: all of them), as idemriver.Migrate does: the files skip
// those, apply the others, and leave River's migrator nothing.
func applyAfterRiver(t *testing.T, tc toolCase, bin string, before int) {
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(t.Context(), rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{TargetVersion: before}); err != nil {
		t.Fatal(err)
	}
	stamps := func() map[int]time.Time {
		t.Helper()
		out := map[int]time.Time{}
		rows, err := pool.Query(t.Context(), `SELECT version, created_at FROM river_migration`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int
			var at time.Time
			if err := rows.Scan(&v, &at); err != nil {
				t.Fatal(err)
			}
			out[v] = at
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := stamps()
	dir := writeFolder(t, tc, true)
	runTool(t, tc.up(bin, dir, url))
	riverWorks(t, url)
	after := stamps()
	if len(after) != len(riverVersions(t)) {
		t.Fatalf("river_migration lists versions %v, want each of River's once", slices.Sorted(maps.Keys(after)))
	}
	if len(first) != cmp.Or(before, len(after)) {
		t.Fatalf("River's migrator applied versions %v, want them up to %d", slices.Sorted(maps.Keys(first)), before)
	}
	for v := range first {
		if !after[v].Equal(first[v]) {
			t.Errorf("version %d, applied by River's migrator, was recorded again by the files", v)
		}
	}
}

// applyBesideRiver applies River's files, new to a folder the database
// was migrated with, while River's migrator, under idemriver.Migrate's
// lock, is applying River's first versions, as a server starting during a
// deploy's migration job would: the files wait for the lock, then find
// those versions applied, and apply the rest.
func applyBesideRiver(t *testing.T, tc toolCase, bin string) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The key store's first: the open transaction below would hold up
	// its index built CONCURRENTLY, which waits for older transactions.
	dir := writeFolder(t, tc, false)
	runTool(t, tc.up(bin, dir, url))
	var stderr bytes.Buffer
	if code := run([]string{"migrations", "-format", tc.format, "-dir", dir, "-river"}, &stderr, &stderr); code != 0 {
		t.Fatalf("idemgen migrations -river: exit %d\n%s", code, stderr.String())
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, idemriver.MigrateLock); err != nil {
		t.Fatal(err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{TargetVersion: 2}); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte, 1)
	args := tc.up(bin, dir, url)
	go func() {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			out = append(out, []byte("\n"+err.Error())...)
		} else {
			out = nil
		}
		done <- out
	}()
	// Release the lock as soon as the tool waits for it, well within
	// the files' lock_timeout.
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case out := <-done:
			t.Fatalf("the tool did not wait for River's migrator's lock: %s", out)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = tx.Commit(ctx)
			t.Fatalf("the tool never waited for River's migrator's lock: %s", <-done)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out != nil {
		t.Fatalf("%s: %s", strings.Join(args[1:], " "), out)
	}
	riverWorks(t, url)
}

// riverVersions lists River's migrations, as this build of River has them.
func riverVersions(t *testing.T) []rivermigrate.Migration {
	t.Helper()
	m, err := rivermigrate.New(riverpgxv5.New(nil), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return m.AllVersions()
}

// probeArgs is a River job that riverWorks inserts.
type probeArgs struct {
	N int `json:"n"`
}

func (probeArgs) Kind() string { return "idemgen_migration_probe" }

// riverWorks checks River's tables at url as River sees them: every
// version applied, nothing left for idemriver.Migrate to apply, and a
// unique job inserted once, then skipped as a duplicate (which uses
// 006's unique index and function).
func riverWorks(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	status, err := idemriver.MigrationStatus(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range status {
		if !m.Applied {
			t.Errorf("River's %03d_%s is not applied, as River's migrator sees it", m.Version, m.Name)
		}
	}
	applied, err := idemriver.MigrateUp(ctx, pool)
	if err != nil || len(applied) != 0 {
		t.Fatalf("idemriver.Migrate after the files: applied %v, %v; want nothing, no error", applied, err)
	}
	client, err := idemriver.NewInsertClient()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	opts := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	if _, err := client.InsertTx(ctx, tx, probeArgs{N: 1}, opts); err != nil {
		t.Fatalf("insert a River job: %v", err)
	}
	again, err := client.InsertTx(ctx, tx, probeArgs{N: 1}, opts)
	if err != nil || !again.UniqueSkippedAsDuplicate {
		t.Fatalf("insert the unique job again: %+v, %v; want it skipped as a duplicate", again, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'available'`, probeArgs{}.Kind()).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("%d available probe jobs (%v), want 1", jobs, err)
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
