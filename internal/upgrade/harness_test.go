package upgrade

// The harness: it builds both releases' binaries once per test binary,
// runs them as processes, and talks to them over HTTP as a client does.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/schema"
)

func TestMain(m *testing.M) {
	removeStaleBuilds()
	pgtest.Main(m)
}

// release is one release's binaries.
type release struct {
	name      string // v0.1.0
	ordersAPI string
	idemgen   string
	fakePSP   string // built for the current release only
}

// builds holds both releases' binaries, built by the first test that
// asks and shared by every test of the binary. They are removed when the
// last round of tests (-count, -cpu) is done with them; a test binary
// that dies first leaves them to removeStaleBuilds of the next run.
var builds struct {
	mu        sync.Mutex
	dir       string // "" while not built
	prev, cur release
	missing   string // why the previous release cannot be built here
	err       error
	users     int // tests of the running round holding the binaries
	rounds    int // rounds of tests done with them
}

// buildPrefix starts the name of the directory holding the binaries; the
// test binary's process id follows it.
const buildPrefix = "idemgen-upgrade-"

// releases returns the previous and the current release's binaries,
// building them on first use. A test calls it before t.Parallel, so that
// every test of a round holds the binaries before any of them is done.
// Without the previous release's commit in the repository's history the
// test is skipped, saying how to fetch it, except under CI (CI set),
// where it fails. -short skips it, as other tests that build modules.
func releases(t *testing.T) (prev, cur release) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the previous release and the working tree with the go command")
	}
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" && builds.err == nil && builds.missing == "" {
		start := time.Now()
		builds.dir, builds.prev, builds.cur, builds.missing, builds.err = build(t.Context())
		if builds.err == nil && builds.missing == "" {
			t.Logf("built %s (commit %.12s) and the working tree in %v", PreviousRelease, PreviousCommit, time.Since(start).Round(time.Millisecond))
		}
	}
	switch {
	case builds.missing != "" && os.Getenv("CI") != "":
		t.Fatalf("%s (CI is set, so this fails rather than skips)", builds.missing)
	case builds.missing != "":
		t.Skip(builds.missing)
	case builds.err != nil:
		t.Fatal(builds.err)
	}
	builds.users++
	t.Cleanup(func() {
		builds.mu.Lock()
		defer builds.mu.Unlock()
		if builds.users--; builds.users > 0 {
			return
		}
		if builds.rounds++; builds.rounds >= rounds() && builds.dir != "" {
			_ = os.RemoveAll(builds.dir)
			builds.dir = ""
		}
	})
	return builds.prev, builds.cur
}

// rounds is how often the test binary runs each test: -count times per
// entry of -cpu.
func rounds() int {
	n := 1
	if f := flag.Lookup("test.count"); f != nil {
		if c, err := strconv.Atoi(f.Value.String()); err == nil && c > 0 {
			n = c
		}
	}
	if f := flag.Lookup("test.cpu"); f != nil && f.Value.String() != "" {
		n *= len(strings.Split(f.Value.String(), ","))
	}
	return n
}

// build extracts the previous release's commit from the repository's
// history and builds its binaries, and the working tree's, into a new
// directory. missing is set instead when that commit cannot be had.
func build(ctx context.Context) (dir string, prev, cur release, missing string, err error) {
	gomod, err := output(ctx, "", "go", "env", "GOMOD")
	if err != nil {
		return "", prev, cur, "", err
	}
	if gomod == "" || gomod == os.DevNull {
		return "", prev, cur, "", errors.New("go env GOMOD names no go.mod: run the tests inside the idemgen module")
	}
	modRoot := filepath.Dir(gomod)
	top, err := output(ctx, modRoot, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", prev, cur, fmt.Sprintf("%s is not a git checkout (%v), so the previous release %s (commit %s) cannot be built from its history; run the upgrade tests in a clone of the repository (in a shallow one, run git fetch --unshallow first)",
			modRoot, err, PreviousRelease, PreviousCommit), nil
	}
	if _, err := output(ctx, top, "git", "cat-file", "-e", PreviousCommit+"^{commit}"); err != nil {
		how := "this clone's history lacks it"
		if shallow, _ := output(ctx, top, "git", "rev-parse", "--is-shallow-repository"); shallow == "true" {
			how = "this clone is shallow"
		}
		return "", prev, cur, fmt.Sprintf("the previous release %s (commit %s) cannot be built: %s; fetch the history with `git fetch --unshallow` (or `git fetch origin %s`) and run the tests again",
			PreviousRelease, PreviousCommit, how, PreviousCommit), nil
	}
	sub, err := filepath.Rel(top, modRoot)
	if err != nil {
		return "", prev, cur, "", err
	}

	dir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid()))
	if err != nil {
		return "", prev, cur, "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
			dir = ""
		}
	}()
	src, err := previousSource(ctx, top, dir)
	if err != nil {
		return "", prev, cur, "", fmt.Errorf("extracting %s (commit %s): %w", PreviousRelease, PreviousCommit, err)
	}

	prev = release{
		name:      PreviousRelease,
		ordersAPI: filepath.Join(dir, "previous", "orders-api"),
		idemgen:   filepath.Join(dir, "previous", "idemgen"),
	}
	cur = release{
		name:      idem.Release,
		ordersAPI: filepath.Join(dir, "current", "orders-api"),
		idemgen:   filepath.Join(dir, "current", "idemgen"),
		fakePSP:   filepath.Join(dir, "current", "fake-psp"),
	}
	// Built as go test and go build build, so the dependencies come from
	// the build cache those filled.
	goBuild := func(moduleDir, out string, pkgs ...string) error {
		args := append([]string{"build", "-o", out + string(filepath.Separator)}, pkgs...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build in %s: %v\n%s", moduleDir, err, b)
		}
		return nil
	}
	var prevErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		prevErr = goBuild(filepath.Join(src, sub), filepath.Dir(prev.ordersAPI), "./example/cmd/orders-api", "./cmd/idemgen")
	})
	curErr := goBuild(modRoot, filepath.Dir(cur.ordersAPI), "./example/cmd/orders-api", "./cmd/idemgen", "./example/cmd/fake-psp")
	wg.Wait()
	if err := errors.Join(prevErr, curErr); err != nil {
		return "", prev, cur, "", fmt.Errorf("building the releases: %w", err)
	}
	return dir, prev, cur, "", nil
}

// previousSource extracts the previous release's commit from the
// repository at top (git archive | tar -x) and returns the directory of
// its tree. The tree is kept in the user's cache directory, named by the
// commit, so that the build cache's entries for its packages, which are
// keyed by their directory, serve every later run instead of piling up;
// without a cache directory it goes in tmp.
func previousSource(ctx context.Context, top, tmp string) (string, error) {
	extract := func(into string) error {
		if err := os.Mkdir(into, 0o755); err != nil {
			return err
		}
		// Through a file: no pipe to leave blocked when either side fails.
		archive := into + ".tar"
		defer os.Remove(archive)
		if _, err := output(ctx, "", "git", "-C", top, "archive", "--output="+archive, PreviousCommit); err != nil {
			return err
		}
		_, err := output(ctx, "", "tar", "-x", "-f", archive, "-C", into)
		return err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		src := filepath.Join(tmp, "src")
		return src, extract(src)
	}
	parent := filepath.Join(cache, "idemgen", "upgrade")
	src := filepath.Join(parent, PreviousCommit)
	if _, err := os.Stat(src); err == nil {
		return src, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp(parent, "extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	tree := filepath.Join(staging, "tree")
	if err := extract(tree); err != nil {
		return "", err
	}
	// Renamed whole, so that a run sees all of the tree or none of it.
	if err := os.Rename(tree, src); err != nil {
		if _, statErr := os.Stat(src); statErr == nil {
			return src, nil // another run was first
		}
		return "", err
	}
	// The trees of earlier previous releases are of no more use.
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != PreviousCommit && !strings.HasPrefix(e.Name(), "extract-") {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
	return src, nil
}

// output runs a command in dir and returns its trimmed standard output.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// removeStaleBuilds removes the binaries of test binaries that died
// before they could.
func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), buildPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err == nil && n != os.Getpid() && processGone(n) {
			_ = os.RemoveAll(d)
		}
	}
}

// tool runs one of a release's idemgen commands against dbURL.
func tool(ctx context.Context, rel release, dbURL string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, rel.idemgen, append(args, "-database-url", dbURL)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s idemgen %s: %w\nstdout:\n%s\nstderr:\n%s", rel.name, strings.Join(args, " "), err, o.String(), e.String())
	}
	return o.String(), e.String(), err
}

// proc is a running orders-api or fake-psp.
type proc struct {
	name    string // v0.1.0 orders-api #2
	release string
	url     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once it has exited and its log is read
	waitErr error         // set before exited is closed

	mu   sync.Mutex
	logs strings.Builder
}

var listening = regexp.MustCompile(`msg="(?:orders-api|fake-psp): listening" url=(\S+)`)

// startTimeout bounds a process's start, migrations included.
const startTimeout = 30 * time.Second

// startProc runs bin and waits until it logs where it listens.
func startProc(ctx context.Context, name, rel, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{name: name, release: rel, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = sysProcAttr()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	found := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stderr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.mu.Lock()
				p.logs.WriteString(line)
				p.mu.Unlock()
				if m := listening.FindStringSubmatch(line); m != nil {
					select {
					case found <- m[1]:
					default:
					}
				}
			}
			if err != nil {
				break
			}
		}
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case p.url = <-found:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it listened (%v):\n%s", name, p.waitErr, p.log())
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("%s did not say where it listens: %w:\n%s", name, ctx.Err(), p.log())
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// kill ends the process with SIGKILL, as a crash does, and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill() // fails only when it has exited already
	<-p.exited
}

// stop asks the process to drain and exit (SIGTERM), and returns how it
// exited; it is killed if it has not within the timeout.
func (p *proc) stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
}

// cluster runs a test's processes on one database and payment provider,
// and kills whatever still runs when the test ends, showing the logs of
// a failed test.
type cluster struct {
	t      *testing.T
	dbURL  string
	pspURL string

	mu      sync.Mutex
	all     []*proc
	started map[string]int // orders-api processes started, per release
}

func newCluster(t *testing.T, dbURL string) *cluster {
	c := &cluster{t: t, dbURL: dbURL, started: map[string]int{}}
	t.Cleanup(func() {
		c.mu.Lock()
		all := c.all
		c.mu.Unlock()
		for _, p := range all {
			p.kill()
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("log of %s (%s):\n%s", p.name, p.url, tail(p.log(), 60))
			}
		}
	})
	return c
}

func (c *cluster) add(p *proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, p)
}

// startPSP starts the fake payment provider of rel, which every server
// of the cluster charges.
func (c *cluster) startPSP(ctx context.Context, rel release) error {
	p, err := startProc(ctx, rel.name+" fake-psp", rel.name, rel.fakePSP, nil, "-addr", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c.add(p)
	c.pspURL = p.url
	return nil
}

// startServer starts an orders-api of rel on the cluster's database; it
// runs the key store's migrations it knows, and the application's.
func (c *cluster) startServer(ctx context.Context, rel release) (*proc, error) {
	c.mu.Lock()
	c.started[rel.name]++
	name := fmt.Sprintf("%s orders-api #%d", rel.name, c.started[rel.name])
	c.mu.Unlock()
	p, err := startProc(ctx, name, rel.name, rel.ordersAPI, []string{"DATABASE_URL=" + c.dbURL, "ORDERS_AUTH_SECRET=" + authSecret},
		"-addr", "127.0.0.1:0", "-psp-url", c.pspURL)
	if err != nil {
		return nil, err
	}
	c.add(p)
	return p, nil
}

// pspStats reads the fake payment provider's counts.
func (c *cluster) pspStats(ctx context.Context, client *http.Client) (pspStats, error) {
	var s pspStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.pspURL+"/v1/stats", nil)
	if err != nil {
		return s, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /v1/stats: %s", resp.Status)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// pspStats is the fake provider's GET /v1/stats.
type pspStats struct {
	Requests int `json:"requests"`
	Charges  int `json:"charges"`
	Declines int `json:"declines"`
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("[%d lines before]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], ""))
}

// answer is a server's answer to one request.
type answer struct {
	status      int
	body        string
	replayed    bool // Idempotent-Replayed: true
	location    string
	problemType string // the "type" of a problem+json body
	server      string // the process that answered
	release     string
}

func (a answer) String() string {
	replayed := ""
	if a.replayed {
		replayed = " (replayed)"
	}
	return fmt.Sprintf("%d%s from %s: %s", a.status, replayed, a.server, strings.TrimSpace(a.body))
}

// authSecret is the secret of the current release's bearer tokens, in the
// servers' environment. The previous release reads neither it nor the
// token: it checked no account.
const authSecret = "upgrade-test-secret"

// post sends an idempotent POST to server p as account, with its token,
// and reads the whole answer.
func post(ctx context.Context, client *http.Client, p *proc, path, account, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Account-Id", account)
	req.Header.Set("Authorization", "Bearer "+server.Token(authSecret, account))
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{
		status:   resp.StatusCode,
		body:     string(b),
		replayed: resp.Header.Get("Idempotent-Replayed") == "true",
		location: resp.Header.Get("Location"),
		server:   p.name,
		release:  p.release,
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), idem.ContentTypeProblem) {
		var problem struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(b, &problem) == nil {
			a.problemType = problem.Type
		}
	}
	return a, nil
}

// newClient returns an HTTP client for a test's requests; their contexts
// bound them.
func newClient(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// orderBody is a createOrder request.
func orderBody(amount int, customer string) string {
	return fmt.Sprintf(`{"amount_cents": %d, "currency": "EUR", "customer_id": %q}`, amount, customer)
}

// paymentBody is a createPayment request.
func paymentBody(orderID string, amount int) string {
	return fmt.Sprintf(`{"order_id": %q, "amount_cents": %d}`, orderID, amount)
}

// idOf reads the "id" of an order or payment.
func idOf(body string) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.ID
}

// newerMigrations names the key-store migrations this tree has and the
// previous release does not, in order.
func newerMigrations(t *testing.T) []string {
	t.Helper()
	ups, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ups)
	var newer []string
	for _, up := range ups {
		name := strings.TrimSuffix(up, ".up.sql")
		num, _, _ := strings.Cut(name, "_")
		if v, err := strconv.Atoi(num); err == nil && v > PreviousMigration {
			newer = append(newer, name)
		}
	}
	if len(newer) == 0 {
		t.Fatalf("no migration after %d: the previous release is this one; bump internal/upgrade.Previous*", PreviousMigration)
	}
	return newer
}
