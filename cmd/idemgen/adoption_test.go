package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readmeSteps is what the README's "Adding it to your module" section
// says to do: the files it shows (each code block whose first line is a
// comment naming the file) and the commands of its sh blocks, in order.
type readmeSteps struct {
	files    map[string]string // path -> content
	commands [][]string
}

// adoptionSteps reads the section from README.md.
func adoptionSteps(t *testing.T) readmeSteps {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "\n## Adding it to your module\n")
	if !ok {
		t.Fatal(`README.md has no "## Adding it to your module" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	steps := readmeSteps{files: map[string]string{}}
	var lang string
	var block []string
	for line := range strings.Lines(section) {
		line = strings.TrimRight(line, "\n")
		switch {
		case lang == "" && strings.HasPrefix(line, "```"):
			lang, block = strings.TrimPrefix(line, "```"), nil
		case lang != "" && line == "```":
			steps.add(t, lang, block)
			lang = ""
		case lang != "":
			block = append(block, line)
		}
	}
	if len(steps.commands) == 0 || len(steps.files) == 0 {
		t.Fatalf("the README's adoption section shows no commands or no files: %+v", steps)
	}
	return steps
}

func (s *readmeSteps) add(t *testing.T, lang string, block []string) {
	if len(block) == 0 {
		return
	}
	if lang == "sh" {
		for _, line := range block {
			cmd, _, _ := strings.Cut(line, " #")
			if f := strings.Fields(cmd); len(f) > 0 {
				s.commands = append(s.commands, f)
			}
		}
		return
	}
	first := strings.TrimSpace(block[0])
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(first, "//"), "#"))
	if name == first || strings.ContainsAny(name, " \t") {
		t.Fatalf("a %s block of the README's adoption section does not start with a comment naming its file: %q", lang, first)
	}
	s.files[name] = strings.Join(block[1:], "\n") + "\n"
}

// moduleRoot is the repository's root, two levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the test's source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestReadmeAdoption follows the README's adoption steps as written, in a
// new module beside a checkout of this repository (../idemgen, a link to
// it): point the module at the checkout, get the tool, write the config
// and the generate line, generate, tidy, build, vet and check. Nothing is
// seeded: no go.sum, no GOFLAGS. `go get` reads go.mod files of the module
// graph that a fresh cache may lack, so the configured proxies stay on;
// any answer of theirs about idemgen's own paths (a proxy may refuse an
// unknown module with 403) falls through to "off", which leaves the
// checkout's replacement in charge.
func TestReadmeAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, err := filepath.Abs(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	steps := adoptionSteps(t)
	work := t.TempDir()
	if err := os.Symlink(root, filepath.Join(work, "idemgen")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "orders")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOPROXY="+proxiesThenOff(t, goTool))
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// The new team's module, with its spec.
	run("mod", "init", "example.com/orders")
	spec, err := os.ReadFile(filepath.Join(root, "example", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "openapi.yaml"), string(spec))

	// The README's steps, files first: the commands need them.
	for name, content := range steps.files {
		write(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	for _, c := range steps.commands {
		if c[0] != "go" {
			t.Fatalf("the README's adoption step %q is not a go command; this test runs only those", strings.Join(c, " "))
		}
		run(c[1:]...)
	}
	for _, want := range []string{"api/oapi.gen.go", "api/idempotency.gen.go"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("after the README's steps: %v", err)
		}
	}
	if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !strings.Contains(string(mod), "tool github.com/idemgen/idemgen/cmd/idemgen") {
		t.Errorf("go.mod does not list idemgen as a tool (%v):\n%s", err, mod)
	}
}

// proxiesThenOff is the configured GOPROXY without "direct", each proxy
// falling through to the next on any error and finally to "off".
func proxiesThenOff(t *testing.T, goTool string) string {
	t.Helper()
	out, err := exec.Command(goTool, "env", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env GOPROXY: %v", err)
	}
	var list []string
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			list = append(list, p)
		}
	}
	return strings.Join(append(list, "off"), "|")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
