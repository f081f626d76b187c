package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// idemgen runs the command and returns its exit code and output.
func idemgen(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"Usage:", "\tgenerate ", "\tcheck ", "\tmigrations ", "\tsweep ", "\treap ", "\tversion ", "idemgen help annotations", "idemgen help config"}},
		{[]string{"help", "sweep"}, []string{"usage: idemgen sweep [-abandoned-for duration] [-batch int] [-config file] [-database-url URL] [-dry-run] [-fail]"}},
		{[]string{"migrations", "-h"}, []string{"usage: idemgen migrations [-dir dir] [-format format] [-lock-timeout duration] [-q] [-river] [-version n]", "in the\nwidth of the migrations there", "With -river, River's migrations follow the key store's"}},
		{[]string{"help", "annotations"}, []string{"x-idempotent: true", "fingerprint:", "exclude: [/metadata/trace_id, X-Trace-Id]",
			"scope: {header: X-Account-Id}", "scope: {function: true}", "{header: NAME, function: true}", "none ", "gets a warning"}},
		{[]string{"help", "config"}, []string{"spec: openapi.yaml", "format: golang-migrate", "skip-prune: true", "//go:generate go tool idemgen -config ../idemgen.yaml"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := idemgen(t, tt.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("the help does not contain %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"generat"}, `idemgen: unknown command "generat"`},
		{[]string{"help", "flags"}, `idemgen help: no help on "flags"`},
		{[]string{"generate", "-confg", "x.yaml"}, "flag provided but not defined: -confg"},
		{[]string{"check", "extra"}, `idemgen check: unexpected arguments ["extra"]`},
		{[]string{"sweep", "-batch", "0"}, "idemgen sweep: -batch must be positive"},
		{[]string{"sweep", "-abandoned-for", "-1h"}, "idemgen sweep: -abandoned-for must be positive"},
		{[]string{"reap", "-fail"}, "flag provided but not defined: -fail"},
		{[]string{"reap", "now"}, `idemgen reap: unexpected arguments ["now"]`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := idemgen(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr does not contain %q:\n%s", tt.want, stderr)
			}
		})
	}
}

// copyCase copies the generator's orders test case into a temporary
// directory and returns its config's path.
func copyCase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"idemgen.yaml", "openapi.yaml"} {
		src, err := os.ReadFile(filepath.Join("..", "..", "generator", "testdata", "orders", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "idemgen.yaml")
}

// timing matches the elapsed time the summary ends with, e.g. (58ms).
var timing = `\((\d+h)?(\d+m)?\d+(\.\d+)?(µs|ms|s)\)`

func TestGenerateThenCheck(t *testing.T) {
	config := copyCase(t)
	dir := filepath.Dir(config)

	code, stdout, stderr := idemgen(t, "generate", "-config", config)
	if code != 0 {
		t.Fatalf("generate: exit %d\n%s", code, stderr)
	}
	summary := regexp.MustCompile(`^idemgen: openapi\.yaml: 4 operations, 2 idempotent; wrote 29 of 29 files ` + timing + "\n")
	if !summary.MatchString(stderr) {
		t.Errorf("generate printed\n%s\nwant a summary matching %s", stderr, summary)
	}
	for _, f := range []string{"gen/oapi.gen.go", "gen/idempotency.gen.go", "gen/migrations/0001_idempotency_keys.up.sql", "gen/queries/idempotency_keys.sql"} {
		if !strings.Contains(stderr, "\t"+filepath.Join(dir, f)+"\n") {
			t.Errorf("generate did not list %s:\n%s", f, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}

	code, _, stderr = idemgen(t, "check", "-config", config)
	if code != 0 {
		t.Fatalf("check: exit %d\n%s", code, stderr)
	}
	summary = regexp.MustCompile(`^idemgen: openapi\.yaml: 4 operations, 2 idempotent; 29 files up to date ` + timing + "\n$")
	if !summary.MatchString(stderr) {
		t.Errorf("check printed\n%s\nwant a summary matching %s", stderr, summary)
	}

	// Generating again writes nothing; -q prints nothing.
	code, stdout, stderr = idemgen(t, "-q", "-config", config)
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("generate -q again: exit %d, stdout %q, stderr %q; want 0 and no output", code, stdout, stderr)
	}

	// A hand edit makes check fail, naming the file.
	edited := filepath.Join(dir, "gen", "idempotency.gen.go")
	src, err := os.ReadFile(edited)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(edited, append(src, "// edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = idemgen(t, "check", "-config", config)
	if code != 1 {
		t.Errorf("check after an edit: exit %d, want 1", code)
	}
	if !strings.Contains(stderr, "gen/idempotency.gen.go (differs)") || strings.Contains(stderr, "oapi.gen.go") {
		t.Errorf("check after an edit printed\n%s\nwant it to name gen/idempotency.gen.go only", stderr)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{
			name:   "unknown key",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\n  pakage: gen\n",
			want:   []string{`:4: unknown key "pakage" in output`, "idemgen help config"},
		},
		{
			name:   "missing spec",
			config: "output:\n  dir: gen\n",
			want:   []string{"spec is missing", "idemgen help config"},
		},
		{
			name:   "unknown server",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\nserver: fiber\n",
			want:   []string{`:4: server "fiber" is unknown; expected one of std-http, chi, echo, gin`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := copyCase(t)
			if err := os.WriteFile(config, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := idemgen(t, "generate", "-config", config)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.HasPrefix(stderr, "idemgen: "+config+":") {
				t.Errorf("the error does not start with the config file's path:\n%s", stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("the error does not contain %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(config), "gen")); err == nil {
				t.Error("a bad config wrote output")
			}
		})
	}
}

// An annotation error fails generate with exit 1 and the spec's position.
func TestSpecError(t *testing.T) {
	config := copyCase(t)
	spec := filepath.Join(filepath.Dir(config), "openapi.yaml")
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("x-idempotency-ttl: 24h"), []byte("x-idempotency-ttl: 1 day"), 1)
	if err := os.WriteFile(spec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := idemgen(t, "check", "-config", config)
	want := "idemgen: " + spec + `:16:26: x-idempotency-ttl: "1 day" is not a duration`
	if code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr\n%s\nwant 1 and an error starting\n%s", code, stderr, want)
	}
}

// Warnings go to stderr on generate and check, before the summary, and
// stay with -q; they do not fail either command.
func TestWarnings(t *testing.T) {
	config := copyCase(t)
	spec := filepath.Join(filepath.Dir(config), "openapi.yaml")
	src, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	// createOrder, annotated without a scope, takes a tenant's header.
	src = bytes.Replace(src, []byte("- name: X-Request-Id"), []byte("- name: X-Tenant-Id"), 1)
	if err := os.WriteFile(spec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	warning := "idemgen: " + spec + ":13:7: warning: x-idempotent on POST /accounts/{account_id}/orders: keys are shared by every caller, " +
		"but the operation declares header X-Tenant-Id; set scope: {header: X-Tenant-Id} in x-idempotent or x-idempotency, " +
		"scope: {function: true} if idem.Options.Scope scopes keys in Go, or scope: none if callers may share keys\n"
	for _, args := range [][]string{
		{"generate", "-config", config},
		{"check", "-config", config},
		{"-q", "-config", config},
		{"check", "-q", "-config", config},
	} {
		code, stdout, stderr := idemgen(t, args...)
		if code != 0 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want 0 and nothing\n%s", args, code, stdout, stderr)
		}
		rest, ok := strings.CutPrefix(stderr, warning)
		if !ok {
			t.Errorf("%q printed\n%s\nwant it to start with\n%s", args, stderr, warning)
			continue
		}
		if quiet := slices.Contains(args, "-q"); quiet != (rest == "") {
			t.Errorf("%q printed after the warning\n%s", args, rest)
		}
	}
}

func TestMigrationsCommand(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"migrations", "-format", "goose", "-dir", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "0001_idempotency_keys.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "-- +goose Up") || !strings.Contains(string(b), "CREATE TABLE IF NOT EXISTS idempotency_keys") {
		t.Errorf("goose migration:\n%s", b)
	}
	if code := run([]string{"migrations", "-format", "flyway", "-dir", dir}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `invalid value "flyway" for -format`) {
		t.Errorf("unknown format: exit %d, %s", code, stderr.String())
	}

	// Another format: its files written, goose's removed, each counted
	// as what it is.
	n := len(mustGlob(t, dir, "*.sql"))
	stderr.Reset()
	if code := run([]string{"migrations", "-format", "golang-migrate", "-dir", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := fmt.Sprintf("idemgen: wrote %d of %d migration files, removed %d no longer generated\n", 2*n, 2*n, n)
	if first, _, _ := strings.Cut(stderr.String(), "\t"); first != want {
		t.Errorf("switching format printed %q, want %q", first, want)
	}
}

func mustGlob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s in %s (%v)", pattern, dir, err)
	}
	return m
}

// keyStore returns the URL of a fresh database with the key store's
// migrations applied, and a pool on it.
func keyStore(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return url, pool
}

// insertKeys inserts n keys named prefix-1 to prefix-n; values is the SQL
// for status, locked_until, response_status and expires_at.
func insertKeys(t *testing.T, pool *pgxpool.Pool, prefix string, n int, values string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO idempotency_keys
		(scope, operation, key, fingerprint, derived, status, locked_until, response_status, expires_at)
		SELECT 'tenant', 'createOrder', $1 || '-' || i, 'fp', false, `+values+`
		FROM generate_series(1, $2::integer) AS i`, prefix, n); err != nil {
		t.Fatal(err)
	}
}

// rows counts the key table's rows by status and response status, e.g.
// "completed 500".
func rows(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	r, err := pool.Query(context.Background(),
		`SELECT status || ' ' || coalesce(response_status, 0), count(*)::int FROM idempotency_keys GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string]int{}
	for r.Next() {
		var k string
		var n int
		if err := r.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// summary is the line a job's output ends with.
func summary(stderr string) string {
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSweepCommand(t *testing.T) {
	url, pool := keyStore(t)
	insertKeys(t, pool, "abandoned", 3, `'in_flight', now() - interval '2 hours', NULL, now() + interval '1 day'`)
	insertKeys(t, pool, "recent", 1, `'in_flight', now() - interval '10 minutes', NULL, now() + interval '1 day'`)
	insertKeys(t, pool, "leased", 1, `'in_flight', now() + interval '1 minute', NULL, now() + interval '1 day'`)
	untouched := map[string]int{"in_flight 0": 5}

	tests := []struct {
		name    string
		args    []string
		summary string // a regular expression
		logged  string // logged once per abandoned attempt
		after   map[string]int
	}{
		{
			name:    "dry run",
			args:    []string{"sweep", "-database-url", url, "-fail", "-dry-run"},
			summary: `^idemgen: sweep: 3 abandoned attempts \(dry run; nothing changed\)$`,
			logged:  `level=WARN msg="idem: abandoned attempt"`,
			after:   untouched,
		},
		{
			name:    "shorter window",
			args:    []string{"sweep", "-database-url", url, "-abandoned-for", "5m", "-dry-run"},
			summary: `^idemgen: sweep: 4 abandoned attempts \(dry run; nothing changed\)$`,
			after:   untouched,
		},
		{
			name:    "report from DATABASE_URL",
			args:    []string{"sweep"},
			summary: `^idemgen: sweep: 3 abandoned attempts, left for a retry to take over; -fail marks them failed ` + timing + `$`,
			logged:  `level=WARN msg="idem: abandoned attempt"`,
			after:   untouched,
		},
		{
			name:    "fail",
			args:    []string{"sweep", "-database-url", url, "-fail", "-batch", "2"},
			summary: `^idemgen: sweep: 3 abandoned attempts marked failed in 2 batches ` + timing + `$`,
			logged:  `level=INFO msg="idem: failed abandoned attempt" operation=createOrder scope=tenant key=abandoned-`,
			after:   map[string]int{"in_flight 0": 2, "completed 500": 3},
		},
		{
			name:    "nothing left",
			args:    []string{"sweep", "-database-url", url, "-fail"},
			summary: `^idemgen: sweep: 0 abandoned attempts marked failed in 0 batches ` + timing + `$`,
			after:   map[string]int{"in_flight 0": 2, "completed 500": 3},
		},
	}
	t.Setenv("DATABASE_URL", url)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := idemgen(t, tt.args...)
			if code != 0 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 0 and nothing\n%s", code, stdout, stderr)
			}
			if re := regexp.MustCompile(tt.summary); !re.MatchString(summary(stderr)) {
				t.Errorf("the output ends with\n%s\nwant a summary matching %s", summary(stderr), re)
			}
			if tt.logged != "" && strings.Count(stderr, tt.logged) != 3 {
				t.Errorf("the output does not log each of 3 abandoned attempts as %s:\n%s", tt.logged, stderr)
			}
			if got := rows(t, pool); !maps.Equal(got, tt.after) {
				t.Errorf("rows by status %v, want %v", got, tt.after)
			}
		})
	}
}

func TestReapCommand(t *testing.T) {
	url, pool := keyStore(t)
	insertKeys(t, pool, "expired", 5, `'completed', NULL, 201, now() - interval '1 minute'`)
	insertKeys(t, pool, "live", 1, `'completed', NULL, 201, now() + interval '1 hour'`)
	// In flight past its TTL: a reap leaves it to the sweeper.
	insertKeys(t, pool, "stale", 1, `'in_flight', now() - interval '1 day', NULL, now() - interval '1 minute'`)

	tests := []struct {
		name    string
		args    []string
		summary string
		after   map[string]int
	}{
		{
			name:    "dry run",
			args:    []string{"reap", "-database-url", url, "-dry-run"},
			summary: `^idemgen: reap: 5 expired keys would be deleted \(dry run\)$`,
			after:   map[string]int{"completed 201": 6, "in_flight 0": 1},
		},
		{
			name:    "reap",
			args:    []string{"reap", "-database-url", url, "-batch", "2"},
			summary: `^idemgen: reap: deleted 5 expired keys in 3 batches ` + timing + `$`,
			after:   map[string]int{"completed 201": 1, "in_flight 0": 1},
		},
		{
			name:    "nothing left",
			args:    []string{"reap", "-database-url", url},
			summary: `^idemgen: reap: deleted 0 expired keys in 0 batches ` + timing + `$`,
			after:   map[string]int{"completed 201": 1, "in_flight 0": 1},
		},
		{
			// Keys whose attempts derived keys keep their generation.
			name:    "derived",
			args:    []string{"reap", "-database-url", url},
			summary: `^idemgen: reap: deleted 0 expired keys and emptied 2 more whose attempts derived keys, in 1 batch ` + timing + `$`,
			after:   map[string]int{"completed 201": 1, "in_flight 0": 1, "expired 0": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "derived" {
				insertKeys(t, pool, "derived", 2, `'completed', NULL, 201, now() - interval '1 minute'`)
				if _, err := pool.Exec(context.Background(), `UPDATE idempotency_keys SET derived = true WHERE key LIKE 'derived-%'`); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := idemgen(t, tt.args...)
			if code != 0 || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 0 and nothing\n%s", code, stdout, stderr)
			}
			if re := regexp.MustCompile(tt.summary); !re.MatchString(summary(stderr)) {
				t.Errorf("the output ends with\n%s\nwant a summary matching %s", summary(stderr), re)
			}
			if got := rows(t, pool); !maps.Equal(got, tt.after) {
				t.Errorf("rows by status %v, want %v", got, tt.after)
			}
		})
	}
	// With nothing to do, the logger stays quiet; the summary line says it.
	if _, _, stderr := idemgen(t, "reap", "-database-url", url); strings.Contains(stderr, "level=") {
		t.Errorf("a reap that deleted nothing logged:\n%s", stderr)
	}
}

// Without a database, or with one lacking the key table, the jobs say
// what to do.
func TestJanitorCommandErrors(t *testing.T) {
	t.Run("no database", func(t *testing.T) {
		t.Setenv("DATABASE_URL", "")
		for _, cmd := range []string{"sweep", "reap"} {
			code, stdout, stderr := idemgen(t, cmd, "-dry-run")
			want := "idemgen " + cmd + ": no database; set DATABASE_URL or pass -database-url\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", cmd, code, stdout, stderr, want)
			}
		}
	})
	t.Run("no table", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		for _, args := range [][]string{
			{"sweep", "-database-url", url},
			{"sweep", "-database-url", url, "-fail"},
			{"reap", "-database-url", url},
			{"reap", "-database-url", url, "-dry-run"},
		} {
			code, _, stderr := idemgen(t, args...)
			want := "idemgen " + args[0] + `: the key store's table does not exist in this database (relation "idempotency_keys" does not exist, SQLSTATE 42P01); ` +
				"apply the key store's migrations: idemgen migrations, or pgstore.Migrate\n"
			if code != 1 || stderr != want {
				t.Errorf("%q: exit %d, stderr\n%s\nwant 1 and\n%s", args, code, stderr, want)
			}
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		code, _, stderr := idemgen(t, "reap", "-database-url", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
		if code != 1 || !strings.HasPrefix(stderr, "idemgen reap: pgstore: reap: ") {
			t.Errorf("exit %d, stderr\n%s\nwant 1 and the wrapped error", code, stderr)
		}
	})
	t.Run("help", func(t *testing.T) {
		for cmd, want := range map[string][]string{
			"sweep": {"-database-url", "$DATABASE_URL", "-abandoned-for", "-fail", "-batch", "(default 500)", "-dry-run"},
			"reap":  {"-database-url", "-batch", "(default 1000)", "-dry-run"},
		} {
			code, stdout, _ := idemgen(t, cmd, "-h")
			if code != 0 {
				t.Errorf("%s -h: exit %d, want 0", cmd, code)
			}
			for _, w := range want {
				if !strings.Contains(stdout, w) {
					t.Errorf("%s -h does not mention %s:\n%s", cmd, w, stdout)
				}
			}
		}
	})
}

// With -config, sweep -fail stores the attempt-abandoned problem in the
// error shape of the config's errors section, as the API answers
// everything else, and says a retry is not right.
func TestSweepInErrorShape(t *testing.T) {
	url, pool := keyStore(t)
	insertKeys(t, pool, "abandoned", 1, `'in_flight', now() - interval '2 hours', NULL, now() + interval '1 day'`)
	config := filepath.Join(t.TempDir(), "idemgen.yaml")
	if err := os.WriteFile(config, []byte(`spec: openapi.yaml
output: {dir: gen}
errors:
  schema: "#/components/schemas/Error"
  envelope: error
  members: {code: code, detail: message}
  retry-header: Stripe-Should-Retry
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := idemgen(t, "sweep", "-database-url", url, "-fail", "-config", config); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var body, headers []byte
	if err := pool.QueryRow(context.Background(), `SELECT response_body, response_headers FROM idempotency_keys`).Scan(&body, &headers); err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &stored); err != nil || stored.Error.Code != "attempt-abandoned" || stored.Error.Message == "" {
		t.Errorf("stored body %s (%v); want the attempt-abandoned problem in the error envelope", body, err)
	}
	var h http.Header
	if err := json.Unmarshal(headers, &h); err != nil || h.Get("Content-Type") != "application/json" || h.Get("Stripe-Should-Retry") != "false" {
		t.Errorf("stored headers %s (%v)", headers, err)
	}

	if code, _, stderr := idemgen(t, "sweep", "-database-url", url, "-config", filepath.Join(t.TempDir(), "missing.yaml")); code != 2 || !strings.Contains(stderr, "read config") {
		t.Errorf("a config that cannot be read: exit %d\n%s", code, stderr)
	}
}
