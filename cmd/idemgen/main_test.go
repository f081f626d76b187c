package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

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
		{[]string{"help"}, []string{"Usage:", "idemgen check", "x-idempotent: true", "x-idempotent:\n", "ttl: 7d"}},
		{[]string{"help", "annotations"}, []string{"x-idempotent: true", "fingerprint:", "exclude: [/metadata/trace_id]"}},
		{[]string{"help", "config"}, []string{"spec: openapi.yaml", "format: golang-migrate", "skip-prune: true"}},
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
		{[]string{"help", "flags"}, `idemgen: no help on "flags"`},
		{[]string{"generate", "-confg", "x.yaml"}, "flag provided but not defined: -confg"},
		{[]string{"check", "extra"}, `idemgen: unexpected arguments ["extra"]`},
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
	summary := regexp.MustCompile(`^idemgen: openapi\.yaml: 4 operations, 2 idempotent; wrote 7 of 7 files ` + timing + "\n")
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
	summary = regexp.MustCompile(`^idemgen: openapi\.yaml: 4 operations, 2 idempotent; 7 files up to date ` + timing + "\n$")
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
			want:   []string{"invalid config", "line 4: field pakage not found", "idemgen help config"},
		},
		{
			name:   "missing spec",
			config: "output:\n  dir: gen\n",
			want:   []string{"invalid config", "spec is missing"},
		},
		{
			name:   "planned server",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\nserver: chi\n",
			want:   []string{`server "chi" is not supported yet`},
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
			if !strings.HasPrefix(stderr, "idemgen: "+config+": ") {
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
	want := "idemgen: " + spec + `:14:26: x-idempotency-ttl: "1 day" is not a duration`
	if code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr\n%s\nwant 1 and an error starting\n%s", code, stderr, want)
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
	if code := run([]string{"migrations", "-format", "flyway", "-dir", dir}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"flyway" is unknown`) {
		t.Errorf("unknown format: exit %d, %s", code, stderr.String())
	}
}
