package generator_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator"
)

// names lists the files of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// writeMigrations generates the migrations into root/migrations in format
// and writes them, stale files removed.
func writeMigrations(t *testing.T, root, format string) *generator.Result {
	t.Helper()
	files, stale, err := migrationFiles(t, root, generator.Migrations{Dir: "migrations", Format: format})
	if err != nil {
		t.Fatal(err)
	}
	res := &generator.Result{Files: files, Stale: stale}
	if _, err := res.Write(root); err != nil {
		t.Fatal(err)
	}
	return res
}

// The key store's migrations fit a folder that has migrations of its own:
// numbered after the highest version there, stable on every run, and
// moved whole, with no file left behind, when the format changes.
func TestMigrationsFitTheFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "migrations")
	writeFile(t, filepath.Join(dir, "00001_init.sql"), []byte("-- +goose Up\nCREATE TABLE users (id int);\n"))
	writeFile(t, filepath.Join(dir, "00002_orders.sql"), []byte("-- +goose Up\nCREATE TABLE orders (id int);\n"))
	writeFile(t, filepath.Join(dir, "README"), []byte("not a migration\n"))

	first := writeMigrations(t, root, generator.FormatGoose)
	want := []string{"00001_init.sql", "00002_orders.sql", "00003_idempotency_keys.sql", "00004_phased_attempts.sql", "00005_key_generations.sql", "00006_pipelined_attempts.sql", "00007_lookup_claims.sql", "00008_retained_generations.sql", "00009_completer_requests.sql", "00010_claim_handover.sql", "00011_derived_by_default.sql", "00012_claims_keep_session_settings.sql", "00013_replay_filter_epoch.sql", "00014_emptied_rows_index.sql", "00015_derived_per_request.sql", "README"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after goose: %q, want %q", got, want)
	}
	// A second run changes nothing, even with a later user migration.
	writeFile(t, filepath.Join(dir, "00016_items.sql"), []byte("-- +goose Up\nCREATE TABLE items (id int);\n"))
	again, stale, err := migrationFiles(t, root, generator.Migrations{Dir: "migrations", Format: generator.FormatGoose})
	if err != nil || len(stale) != 0 {
		t.Fatal(err, stale)
	}
	if err := (&generator.Result{Files: again}).Check(root); err != nil {
		t.Fatalf("second run differs: %v", err)
	}
	if len(again) != len(first.Files) {
		t.Fatalf("%d files, then %d", len(first.Files), len(again))
	}

	// Switching format keeps the versions and removes the old files.
	writeMigrations(t, root, generator.FormatGolangMigrate)
	want = []string{"00001_init.sql", "00002_orders.sql",
		"00003_idempotency_keys.down.sql", "00003_idempotency_keys.up.sql",
		"00004_phased_attempts.down.sql", "00004_phased_attempts.up.sql",
		"00005_key_generations.down.sql", "00005_key_generations.up.sql",
		"00006_pipelined_attempts.down.sql", "00006_pipelined_attempts.up.sql",
		"00007_lookup_claims.down.sql", "00007_lookup_claims.up.sql",
		"00008_retained_generations.down.sql", "00008_retained_generations.up.sql",
		"00009_completer_requests.down.sql", "00009_completer_requests.up.sql",
		"00010_claim_handover.down.sql", "00010_claim_handover.up.sql",
		"00011_derived_by_default.down.sql", "00011_derived_by_default.up.sql",
		"00012_claims_keep_session_settings.down.sql", "00012_claims_keep_session_settings.up.sql",
		"00013_replay_filter_epoch.down.sql", "00013_replay_filter_epoch.up.sql",
		"00014_emptied_rows_index.down.sql", "00014_emptied_rows_index.up.sql",
		"00015_derived_per_request.down.sql", "00015_derived_per_request.up.sql",
		"00016_items.sql", "README"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after switching to golang-migrate: %q, want %q", got, want)
	}
}

// check reports an idemgen file that should not be there, as a format
// switch that was not written would leave.
func TestCheckReportsStaleMigrations(t *testing.T) {
	root := t.TempDir()
	writeMigrations(t, root, generator.FormatGoose)
	files, stale, err := migrationFiles(t, root, generator.Migrations{Dir: "migrations", Format: generator.FormatGolangMigrate})
	if err != nil {
		t.Fatal(err)
	}
	err = (&generator.Result{Files: files, Stale: stale}).Check(root)
	var se *generator.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("Check = %v, want a StaleError", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "0001_idempotency_keys.sql (idemgen's, and no longer generated: remove it)") || !strings.Contains(msg, "0001_idempotency_keys.up.sql (missing)") {
		t.Fatalf("Check does not name the goose file to remove and the missing ones:\n%s", msg)
	}
}

// In a folder of timestamp-versioned migrations, the key store's come
// after the latest, in the same width.
func TestMigrationsAfterTimestamps(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "migrations", "20240101120000_init.up.sql"), []byte("CREATE TABLE users (id int);\n"))
	writeMigrations(t, root, generator.FormatGolangMigrate)
	got := names(t, filepath.Join(root, "migrations"))
	if !slices.Contains(got, "20240101120001_idempotency_keys.up.sql") || !slices.Contains(got, "20240101120003_key_generations.down.sql") {
		t.Fatalf("files %q, want the key store's numbered after 20240101120000", got)
	}
}

// dbmate's migrations are versioned by the time they are first written,
// and keep those versions on every later run; after a user's migration
// stamped later than the clock, they follow it.
func TestDbmateTimestamps(t *testing.T) {
	root := t.TempDir()
	clock := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	m := generator.WithClock(generator.Migrations{Dir: "migrations", Format: generator.FormatDbmate}, func() time.Time { return clock })
	files, _, err := migrationFiles(t, root, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&generator.Result{Files: files}).Write(root); err != nil {
		t.Fatal(err)
	}
	want := []string{"20261124093000_idempotency_keys.sql", "20261124093001_phased_attempts.sql", "20261124093002_key_generations.sql", "20261124093003_pipelined_attempts.sql", "20261124093004_lookup_claims.sql", "20261124093005_retained_generations.sql", "20261124093006_completer_requests.sql", "20261124093007_claim_handover.sql", "20261124093008_derived_by_default.sql", "20261124093009_claims_keep_session_settings.sql", "20261124093010_replay_filter_epoch.sql", "20261124093011_emptied_rows_index.sql", "20261124093012_derived_per_request.sql"}
	if got := names(t, filepath.Join(root, "migrations")); !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}
	src, err := os.ReadFile(filepath.Join(root, "migrations", want[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "\n-- migrate:up\n") || !strings.Contains(string(src), "\n-- migrate:down\n") {
		t.Fatalf("not a dbmate migration:\n%s", src)
	}

	// An hour later the files are the same.
	clock = clock.Add(time.Hour)
	again, stale, err := migrationFiles(t, root, m)
	if err != nil || len(stale) != 0 {
		t.Fatal(err, stale)
	}
	if err := (&generator.Result{Files: again}).Check(root); err != nil {
		t.Fatalf("a later run differs: %v", err)
	}

	// In a folder whose latest migration is stamped after the clock, they
	// come after it.
	root = t.TempDir()
	writeFile(t, filepath.Join(root, "migrations", "20301231235959_future.sql"), []byte("-- migrate:up\n"))
	files, _, err = migrationFiles(t, root, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(files[0].Path); got != "20301231235960_idempotency_keys.sql" {
		t.Fatalf("first file %s, want it after 20301231235959", got)
	}
}

// An explicit version numbers the migrations idemgen has not written
// yet, and one that would collide is refused, naming the fix.
func TestExplicitMigrationVersion(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "migrations")
	writeFile(t, filepath.Join(dir, "0007_users.up.sql"), []byte("CREATE TABLE users (id int);\n"))
	files, _, err := migrationFiles(t, root, generator.Migrations{Dir: "migrations", Version: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f.Path))
	}
	if !slices.Contains(got, "0100_idempotency_keys.up.sql") || !slices.Contains(got, "0102_key_generations.down.sql") {
		t.Fatalf("files %q, want them numbered from 0100", got)
	}

	_, _, err = migrationFiles(t, root, generator.Migrations{Dir: "migrations", Version: 5})
	if !errors.Is(err, generator.ErrConfig) || !strings.Contains(err.Error(), "version 7") || !strings.Contains(err.Error(), "choose a version above 7") {
		t.Fatalf("a colliding version: %v", err)
	}
}

// In a folder of sequentially numbered migrations, the key store's are
// numbered in the width of the user's, so that listing the folder lists
// them after the user's; a folder idemgen wrote in another width before
// is brought to it, the versions' numbers kept.
func TestMigrationWidth(t *testing.T) {
	for _, format := range []string{generator.FormatGolangMigrate, generator.FormatGoose, generator.FormatTern} {
		users := []string{"001", "00001"}
		if format != generator.FormatTern { // tern's versions run 1, 2, 3, with no gaps
			users = append(users, "20240101120000")
		}
		for _, first := range users {
			t.Run(format+"/"+first, func(t *testing.T) {
				root := t.TempDir()
				dir := filepath.Join(root, "migrations")
				user := []string{first + "_create_users.sql"}
				if format == generator.FormatGolangMigrate {
					user = []string{first + "_create_users.down.sql", first + "_create_users.up.sql"}
				}
				for _, f := range user {
					writeFile(t, filepath.Join(dir, f), []byte("CREATE TABLE users (id int);\n"))
				}
				checkWidth := func(when string) {
					t.Helper()
					got := names(t, dir)
					if !slices.IsSorted(got) {
						t.Fatalf("%s: not sorted by name: %q", when, got)
					}
					if !slices.Equal(got[:len(user)], user) {
						t.Fatalf("%s: %q; want the user's %q first", when, got, user)
					}
					var prev uint64
					for _, f := range got[len(user):] {
						version, _, _ := strings.Cut(f, "_")
						if len(version) != len(first) {
							t.Fatalf("%s: %s is numbered in width %d, the user's %s in %d: %q", when, f, len(version), first, len(first), got)
						}
						n, err := strconv.ParseUint(version, 10, 64)
						if err != nil || n < prev {
							t.Fatalf("%s: %s is out of order: %q", when, f, got)
						}
						prev = n
					}
					if n := len(got) - len(user); n == 0 {
						t.Fatalf("%s: no migrations written: %q", when, got)
					}
				}

				writeMigrations(t, root, format)
				checkWidth("first run")
				files, stale, err := migrationFiles(t, root, generator.Migrations{Dir: "migrations", Format: format})
				if err != nil || len(stale) != 0 {
					t.Fatal(err, stale)
				}
				if err := (&generator.Result{Files: files}).Check(root); err != nil {
					t.Fatalf("second run differs: %v", err)
				}

				// Files written in another width are renamed, keeping
				// their numbers.
				wide := map[string]uint64{}
				for _, f := range names(t, dir)[len(user):] {
					version, rest, _ := strings.Cut(f, "_")
					n, _ := strconv.ParseUint(version, 10, 64)
					wider := fmt.Sprintf("%0*d_%s", len(first)+2, n, rest)
					if err := os.Rename(filepath.Join(dir, f), filepath.Join(dir, wider)); err != nil {
						t.Fatal(err)
					}
					wide[rest] = n
				}
				res := writeMigrations(t, root, format)
				if len(res.Stale) != len(wide) {
					t.Errorf("%d stale files, want the %d renamed: %q", len(res.Stale), len(wide), res.Stale)
				}
				checkWidth("after a run in another width")
				for _, f := range names(t, dir)[len(user):] {
					version, rest, _ := strings.Cut(f, "_")
					if n, _ := strconv.ParseUint(version, 10, 64); n != wide[rest] {
						t.Errorf("%s: version %d, was %d", f, n, wide[rest])
					}
				}
			})
		}
	}
}

// Each generated migration bounds its own lock waits, since the migration
// tools apply it without retries: migrations.lock-timeout, 2s by default,
// or none with 0; a value that is not a duration is a config error.
func TestMigrationLockTimeout(t *testing.T) {
	for _, tt := range []struct {
		lockTimeout, want string
	}{
		{"", "SET LOCAL lock_timeout = '2s';"},
		{"1500ms", "SET LOCAL lock_timeout = '1500ms';"},
		{"0", ""},
	} {
		for _, format := range generator.MigrationFormats() {
			files, _, err := generator.MigrationFiles(nil, generator.Migrations{Dir: "m", Format: format, LockTimeout: tt.lockTimeout})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				got := strings.Count(string(f.Content), "SET LOCAL lock_timeout")
				want := 0
				// A migration outside a transaction has nothing to scope
				// SET LOCAL to, and takes no lock that stalls requests.
				if strings.Contains(f.Path, "emptied_rows_index") {
					if got != 0 {
						t.Errorf("lock-timeout %q, %s: %s, outside a transaction, sets lock_timeout %d times", tt.lockTimeout, format, f.Path, got)
					}
					continue
				}
				if tt.want != "" {
					// Both directions of a file that holds both.
					want = 1
					if !strings.HasSuffix(f.Path, ".up.sql") && !strings.HasSuffix(f.Path, ".down.sql") {
						want = 2
					}
				}
				if got != want || (tt.want != "" && !strings.Contains(string(f.Content), tt.want)) {
					t.Errorf("lock-timeout %q, %s: %s sets lock_timeout %d times, want %d of %q", tt.lockTimeout, format, f.Path, got, want, tt.want)
				}
			}
		}
	}
	_, _, err := generator.MigrationFiles(nil, generator.Migrations{Dir: "m", LockTimeout: "soon"})
	if !errors.Is(err, generator.ErrConfig) || !strings.Contains(err.Error(), "migrations.lock-timeout") {
		t.Errorf("lock-timeout soon: %v, want a config error naming migrations.lock-timeout", err)
	}
}

// A key-store migration that cannot run in a transaction (an index built
// CONCURRENTLY) is written so that each tool runs it without one.
func TestMigrationsOutsideTransaction(t *testing.T) {
	markers := map[string][]string{
		generator.FormatGoose:  {"-- +goose NO TRANSACTION\n"},
		generator.FormatTern:   {"---- tern: disable-tx ----\n", "---- tern: disable-tx ----\n"},
		generator.FormatDbmate: {"-- migrate:up transaction:false\n", "-- migrate:down transaction:false\n"},
		// golang-migrate runs a file as one string, in no transaction
		// of its own: the file holds the one statement alone.
		generator.FormatGolangMigrate: nil,
	}
	for _, format := range generator.MigrationFormats() {
		files, _, err := generator.MigrationFiles(nil, generator.Migrations{Dir: "m", Format: format})
		if err != nil {
			t.Fatal(err)
		}
		var found int
		for _, f := range files {
			src := string(f.Content)
			if !strings.Contains(f.Path, "emptied_rows_index") {
				for _, m := range []string{"NO TRANSACTION", "disable-tx", "transaction:false"} {
					if strings.Contains(src, m) {
						t.Errorf("%s: %s runs outside a transaction (%q), but needs one", format, f.Path, m)
					}
				}
				continue
			}
			found++
			for _, m := range markers[format] {
				if got, want := strings.Count(src, m), strings.Count(strings.Join(markers[format], ""), m); got != want {
					t.Errorf("%s: %s has %q %d times, want %d:\n%s", format, f.Path, m, got, want, src)
				}
			}
			// One statement per direction, none of them SET LOCAL.
			var statements int
			for line := range strings.Lines(src) {
				if !strings.HasPrefix(line, "--") && strings.HasSuffix(strings.TrimSpace(line), ";") {
					statements++
				}
			}
			if want := statementsPerFile(format); statements != want {
				t.Errorf("%s: %s has %d statements, want %d:\n%s", format, f.Path, statements, want, src)
			}
		}
		if want := map[bool]int{true: 2, false: 1}[format == generator.FormatGolangMigrate]; found != want {
			t.Errorf("%s: %d files of the emptied-rows index, want %d", format, found, want)
		}
	}
}

// statementsPerFile is how many statements a file of the emptied-rows
// index holds in format: both directions' where one file holds both.
func statementsPerFile(format string) int {
	if format == generator.FormatGolangMigrate {
		return 1
	}
	return 2
}

// migrationFiles renders m into root's migration folder as it is now.
func migrationFiles(t *testing.T, root string, m generator.Migrations) ([]generator.File, []string, error) {
	t.Helper()
	existing, err := generator.ReadMigrationFolder(filepath.Join(root, m.Dir))
	if err != nil {
		t.Fatal(err)
	}
	return generator.MigrationFiles(existing, m)
}
