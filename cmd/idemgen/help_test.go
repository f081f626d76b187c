package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// Every way of asking for help prints it to stdout, prints nothing to
// stderr, and exits 0.
func TestHelpToStdout(t *testing.T) {
	forms := [][]string{
		{"-h"}, {"-help"}, {"--help"},
		{"help"}, {"help", "annotations"}, {"help", "config"},
	}
	for _, c := range commands {
		forms = append(forms, []string{c.name, "-h"}, []string{c.name, "-help"}, []string{c.name, "--help"}, []string{"help", c.name})
	}
	for _, args := range forms {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := idemgen(t, args...)
			if code != 0 || stdout == "" || stderr != "" {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 0, the help, and nothing", code, len(stdout), stderr)
			}
		})
	}
}

// flagMention matches a flag named in help text: -name after a space,
// bracket, parenthesis or quote.
var flagMention = regexp.MustCompile("(?:^|[\\s\\[(`'])-([a-z][a-z-]*)")

// A command's help names exactly the flags its flag set defines, and the
// command accepts each of them.
func TestHelpMatchesFlags(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := c.flags()
			var defined []string
			fs.VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })

			_, help, _ := idemgen(t, c.name, "-h")
			usage, _, _ := strings.Cut(help, "\n")
			for _, name := range defined {
				if !regexp.MustCompile(`\[-` + name + `[\] ]`).MatchString(usage) {
					t.Errorf("the usage line does not list -%s: %s", name, usage)
				}
				if !regexp.MustCompile(`(?m)^  -` + name + `\b`).MatchString(help) {
					t.Errorf("the help does not describe -%s:\n%s", name, help)
				}
			}
			for line := range strings.Lines(help) {
				if strings.HasPrefix(strings.TrimSpace(line), "go ") {
					continue // a go command's flags, such as go get -tool
				}
				for _, m := range flagMention.FindAllStringSubmatch(line, -1) {
					if m[1] != "h" && !slices.Contains(defined, m[1]) {
						t.Errorf("the help names -%s, which idemgen %s does not accept:\n%s", m[1], c.name, help)
					}
				}
			}
			// The short help's line for the command names only its flags.
			_, short, _ := idemgen(t, "help")
			line := regexp.MustCompile(`(?m)^\t` + c.name + ` .*$`).FindString(short)
			if line == "" {
				t.Errorf("idemgen help does not list %s:\n%s", c.name, short)
			}
			for _, m := range flagMention.FindAllStringSubmatch(line, -1) {
				if !slices.Contains(defined, m[1]) {
					t.Errorf("idemgen help names -%s for %s, which does not accept it: %s", m[1], c.name, line)
				}
			}
			// run accepts every flag the set defines, at its default.
			fs.VisitAll(func(f *flag.Flag) {
				if code, _, stderr := idemgen(t, c.name, "-"+f.Name+"="+f.DefValue, "-h"); code != 0 {
					t.Errorf("idemgen %s -%s=%s: exit %d\n%s", c.name, f.Name, f.DefValue, code, stderr)
				}
			})
		})
	}
}

// Bare help is short: the commands, one line each, and where the guides
// are; the guides are their own topics.
func TestHelpIsShort(t *testing.T) {
	_, short, _ := idemgen(t, "help")
	if n := strings.Count(short, "\n"); n > 30 {
		t.Errorf("idemgen help is %d lines, want at most 30:\n%s", n, short)
	}
	for _, w := range []string{"idemgen help annotations", "idemgen help config"} {
		if !strings.Contains(short, w) {
			t.Errorf("idemgen help does not point at %q:\n%s", w, short)
		}
	}
	if strings.Contains(short, "x-idempotent: true") || strings.Contains(short, "output:") {
		t.Errorf("idemgen help prints a guide:\n%s", short)
	}
	if _, long, _ := idemgen(t, "-h"); long != short {
		t.Errorf("idemgen -h differs from idemgen help:\n%s", long)
	}
}

// Usage errors go to stderr with exit 2, worded as flag errors, and end
// with where to find the usage; config errors name the file, the line
// and the keys, never a Go type.
func TestFlagErrors(t *testing.T) {
	goTypes := regexp.MustCompile(`\b(generator|codegen)\.[A-Z]|\bin type\b|\buint64\b|\bint\b|!!`)
	for _, c := range commands {
		t.Run("unknown flag/"+c.name, func(t *testing.T) {
			code, stdout, stderr := idemgen(t, c.name, "-nosuch")
			want := "idemgen " + c.name + ": flag provided but not defined: -nosuch\nRun 'idemgen " + c.name + " -h' for usage.\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing and %q", code, stdout, stderr, want)
			}
		})
	}

	flagTests := []struct {
		name string
		args func(dir string) []string
		want string
	}{
		{
			name: "unknown command",
			args: func(string) []string { return []string{"generat"} },
			want: "idemgen: unknown command \"generat\"\nRun 'idemgen help' for usage.\n",
		},
		{
			name: "bad format",
			args: func(dir string) []string { return []string{"migrations", "-format", "flyway", "-dir", dir} },
			want: "idemgen migrations: invalid value \"flyway\" for -format: expected one of golang-migrate, goose, tern, dbmate\nRun 'idemgen migrations -h' for usage.\n",
		},
		{
			name: "bad version",
			args: func(dir string) []string { return []string{"migrations", "-version", "next", "-dir", dir} },
			want: "idemgen migrations: invalid value \"next\" for -version: parse error\nRun 'idemgen migrations -h' for usage.\n",
		},
		{
			name: "colliding version",
			args: func(dir string) []string {
				if err := os.WriteFile(filepath.Join(dir, "0007_users.up.sql"), []byte("CREATE TABLE users (id int);\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"migrations", "-version", "5", "-dir", dir}
			},
			want: "idemgen migrations: invalid value 5 for -version: 0003_key_generations would be version 7, which {dir} already has; choose a version above 7\nRun 'idemgen migrations -h' for usage.\n",
		},
		{
			name: "unknown default flag",
			args: func(string) []string { return []string{"-confg", "idemgen.yaml"} },
			want: "idemgen generate: flag provided but not defined: -confg\nRun 'idemgen generate -h' for usage.\n",
		},
	}
	for _, tt := range flagTests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := idemgen(t, tt.args(dir)...)
			want := strings.ReplaceAll(tt.want, "{dir}", dir)
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr\n%s\nwant 2, nothing and\n%s", code, stdout, stderr, want)
			}
			if goTypes.MatchString(stderr) || strings.Contains(stderr, "invalid config") {
				t.Errorf("the error names a Go type or the config:\n%s", stderr)
			}
			if names(t, dir) != nil && tt.name != "colliding version" {
				t.Errorf("a usage error wrote %q", names(t, dir))
			}
		})
	}

	configTests := []struct {
		name, config, want string
	}{
		{
			name:   "misspelled key",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\nmigrationz:\n  format: goose\n",
			want: `{config}:4: unknown key "migrationz"; expected one of: spec, output, server, migrations, queries, client, tests, oapi-codegen, errors, jobs (did you mean "migrations"?); ` +
				"see `idemgen help config`",
		},
		{
			name:   "nested key",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\n  pakage: gen\n",
			want:   `{config}:4: unknown key "pakage" in output; expected one of: dir, package, spec (did you mean "package"?); see ` + "`idemgen help config`",
		},
		{
			name:   "unknown key, nothing close",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\nmigrations:\n  tool: goose\n",
			want:   `{config}:5: unknown key "tool" in migrations; expected one of: dir, format, version, lock-timeout; see ` + "`idemgen help config`",
		},
		{
			name:   "two mistakes",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\nmigrations:\n  version: -1\nserver: [chi]\n",
			want: "{config}:5: migrations.version: \"-1\" is not a whole number, 0 or more\n" +
				"{config}:6: server: expected a string; see `idemgen help config`",
		},
		{
			name:   "passed-through options",
			config: "spec: openapi.yaml\noutput:\n  dir: gen\noapi-codegen:\n  output-options:\n    skip-prnue: true\n",
			want:   `{config}:6: unknown key "skip-prnue" in oapi-codegen.output-options; expected one of: skip-fmt, skip-prune, `,
		},
	}
	for _, tt := range configTests {
		t.Run(tt.name, func(t *testing.T) {
			config := copyCase(t)
			if err := os.WriteFile(config, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := idemgen(t, "generate", "-config", config)
			want := "idemgen: " + strings.ReplaceAll(tt.want, "{config}", config)
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, want) {
				t.Errorf("exit %d, stdout %q, stderr\n%s\nwant 1, nothing and\n%s", code, stdout, stderr, want)
			}
			if goTypes.MatchString(stderr) {
				t.Errorf("the error names a Go type:\n%s", stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := idemgen(t, "version")
	want := regexp.MustCompile(`^idemgen v\S+, built with ` + regexp.QuoteMeta(runtime.Version()) + "\n$")
	if code != 0 || stderr != "" || !want.MatchString(stdout) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and a line matching %s", code, stdout, stderr, want)
	}

	for _, tt := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"installed", debug.BuildInfo{Main: debug.Module{Path: idem.ModulePath, Version: "v1.2.3"}}, "v1.2.3"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Path: idem.ModulePath, Version: "(devel)"}}, idem.Release + "-devel"},
		{"checkout with its commit", debug.BuildInfo{Main: debug.Module{Path: idem.ModulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "82e2559adcf2b293b7cbdc0779e15f7508ede239"}}}, idem.Release + "-devel+82e2559adcf2"},
		{"changed checkout", debug.BuildInfo{Main: debug.Module{Path: idem.ModulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "82e2559adcf2b293b7cbdc0779e15f7508ede239"}, {Key: "vcs.modified", Value: "true"}}}, idem.Release + "-devel+82e2559adcf2.dirty"},
		{"no version", debug.BuildInfo{Main: debug.Module{Path: idem.ModulePath}}, idem.Release + "-devel"},
		{"a module's tool", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: "github.com/jackc/pgx/v5", Version: "v5.9.0"}, {Path: idem.ModulePath, Version: "v1.4.0"}}}, "v1.4.0"},
		{"replaced by a directory", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: idem.ModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../idemgen"}}}}, idem.Release + "-devel"},
		{"replaced by a fork", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: idem.ModulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.4.1"}}}}, "v1.4.1"},
	} {
		if got := idem.VersionOf(&tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The help and the README put the generate line in the same place.
func TestHelpGenerateLine(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	generateLines := func(s string) []string {
		var out []string
		for line := range strings.Lines(s) {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "//go:generate") {
				out = append(out, line)
			}
		}
		return out
	}
	inReadme := generateLines(string(readme))
	if len(inReadme) == 0 {
		t.Fatal("the README shows no //go:generate line")
	}
	for _, args := range [][]string{{"help", "config"}, {"generate", "-h"}} {
		_, help, _ := idemgen(t, args...)
		lines := generateLines(help)
		if len(lines) == 0 {
			t.Errorf("idemgen %s shows no //go:generate line", strings.Join(args, " "))
		}
		for _, l := range lines {
			if !slices.Contains(inReadme, l) {
				t.Errorf("idemgen %s shows %q; the README shows %q", strings.Join(args, " "), l, inReadme)
			}
		}
		if !strings.Contains(help, "in the output package") {
			t.Errorf("idemgen %s does not say the line goes in the output package, as the README does:\n%s", strings.Join(args, " "), help)
		}
	}
}

// names lists the files of dir, nil for none.
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
