package generator_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Several tests run parts of one generated package's tests, each kind of
// server once. The package is compiled once per run of this package's
// tests, into a test binary they share, which TestMain removes.
var testBinaries struct {
	sync.Mutex
	dir  string                 // where the binaries are, made on first use
	bins map[string]*testBinary // by key
}

type testBinary struct {
	once sync.Once
	path string // "" when the build failed
	out  string // the build's output when it failed
}

func TestMain(m *testing.M) {
	code := m.Run()
	if *update {
		if err := writeUpdatedDigests(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if testBinaries.dir != "" {
		os.RemoveAll(testBinaries.dir)
	}
	os.Exit(code)
}

// buildTestBinary returns the test binary of the package that write writes
// (a path for the go command, as writeGoPackage returns), built once per
// key for all the tests that ask for it.
func buildTestBinary(t *testing.T, key string, write func(t *testing.T) string) string {
	t.Helper()
	testBinaries.Lock()
	if testBinaries.bins == nil {
		dir, err := os.MkdirTemp("", "idemgen-testbin-")
		if err != nil {
			testBinaries.Unlock()
			t.Fatal(err)
		}
		testBinaries.dir, testBinaries.bins = dir, map[string]*testBinary{}
	}
	b := testBinaries.bins[key]
	if b == nil {
		b = &testBinary{}
		testBinaries.bins[key] = b
	}
	dir := testBinaries.dir
	testBinaries.Unlock()
	b.once.Do(func() {
		b.out = "the first build did not finish"
		pkg := write(t)
		path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(key)+".test")
		if out, err := runGo(t, append(append([]string{"test", "-c", "-o", path}, goTestFlags...), pkg)...); err != nil {
			b.out = err.Error() + "\n" + string(out)
			return
		}
		b.path = path
	})
	if b.path == "" {
		t.Fatalf("go test -c for %s: %s", key, b.out)
	}
	return b.path
}

// runTestBinary runs a test binary's tests that match run and skip none
// of those matching skip ("" for none), and fails with its output when
// they fail.
func runTestBinary(t *testing.T, path, run, skip string) {
	t.Helper()
	args := []string{"-test.count=1"}
	if run != "" {
		args = append(args, "-test.run="+run)
	}
	if skip != "" {
		args = append(args, "-test.skip="+skip)
	}
	out, err := runCommand(t, path, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(path), strings.Join(args, " "), err, out)
	}
	if run != "" && strings.Contains(string(out), "no tests to run") {
		t.Fatalf("%s: no test matches %s", filepath.Base(path), run)
	}
}

// runCommand runs a program and returns its combined output.
func runCommand(t *testing.T, path string, args ...string) ([]byte, error) {
	t.Helper()
	return exec.Command(path, args...).CombinedOutput()
}
