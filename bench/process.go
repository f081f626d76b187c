package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// moduleRoot is the directory of the go.mod of the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run the benchmark inside the idemgen module: go run ./bench")
	}
	return filepath.Dir(gomod), nil
}

// goBuild builds pkg, in root, into dir and returns the binary's path.
func goBuild(ctx context.Context, root, dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// listening is the line a server logs once it listens: the orders-api's
// and bench/fiberpeer's.
var listening = regexp.MustCompile(`msg="[\w-]+: listening" url=(\S+)`)

// serverProc is a server under test, run as a child process.
type serverProc struct {
	cmd  *exec.Cmd
	url  string
	http *http.Client
	mu   sync.Mutex
	log  []string // the last lines of its log
	done chan struct{}
}

// startServer runs the orders-api bin against dbURL on a free loopback
// port, with the statement counter on and the clients' token secret, and
// waits until it listens.
func startServer(ctx context.Context, bin, dbURL string, logTo io.Writer, extraArgs ...string) (*serverProc, error) {
	args := append([]string{"-addr", "127.0.0.1:0", "-db-stats", "-bench-peers"}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"ORDERS_AUTH_SECRET=" + authSecret}
	return startProcess(ctx, cmd, dbURL, logTo)
}

// startProcess starts cmd with DATABASE_URL=dbURL, and the variables in
// cmd.Env, and waits until it logs that it listens.
func startProcess(ctx context.Context, cmd *exec.Cmd, dbURL string, logTo io.Writer) (*serverProc, error) {
	s := &serverProc{
		cmd:  cmd,
		http: &http.Client{Timeout: 30 * time.Second},
		done: make(chan struct{}),
	}
	s.cmd.Env = append(append(os.Environ(), cmd.Env...), "DATABASE_URL="+dbURL)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(s.cmd.Path), err)
	}
	found := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.keep(line)
			if logTo != nil {
				fmt.Fprintf(logTo, "%s: %s\n", filepath.Base(s.cmd.Path), line)
			}
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-found:
		s.url = u
		return s, nil
	case <-s.done:
		_ = s.cmd.Wait()
		return nil, fmt.Errorf("%s exited before listening:\n%s", filepath.Base(s.cmd.Path), s.tail())
	case <-time.After(time.Minute):
		s.stop()
		return nil, fmt.Errorf("%s did not listen within a minute:\n%s", filepath.Base(s.cmd.Path), s.tail())
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
}

func (s *serverProc) keep(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) == 50 {
		s.log = s.log[1:]
	}
	s.log = append(s.log, line)
}

// tail is the end of the server's log, for errors.
func (s *serverProc) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

func (s *serverProc) pid() int { return s.cmd.Process.Pid }

// stop ends the server with SIGTERM, or SIGKILL after ten seconds.
func (s *serverProc) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
	}
	_ = s.cmd.Wait()
}

// dbCounts is what the server's statement counter counted in one part:
// requests or background (see server.Config.DBStats).
type dbCounts struct {
	Statements       map[string]int64 `json:"statements"`
	Commits          int64            `json:"commits"`
	Rollbacks        int64            `json:"rollbacks"`
	AutocommitWrites int64            `json:"autocommit_writes"`
	AutocommitReads  int64            `json:"autocommit_reads"`
	RoundTrips       int64            `json:"round_trips"`
}

// dbStats is the body of GET /debug/db-stats.
type dbStats struct {
	Requests   dbCounts `json:"requests"`
	Background dbCounts `json:"background"`
}

func parseDBStats(body []byte) (dbStats, error) {
	var s dbStats
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("decode /debug/db-stats: %w", err)
	}
	if s.Requests.Statements == nil || s.Background.Statements == nil {
		return s, errors.New("decode /debug/db-stats: no statements; is the server run with -db-stats?")
	}
	return s, nil
}

// minus is c less an earlier c0.
func (c dbCounts) minus(c0 dbCounts) dbCounts {
	d := dbCounts{
		Statements:       map[string]int64{},
		Commits:          c.Commits - c0.Commits,
		Rollbacks:        c.Rollbacks - c0.Rollbacks,
		AutocommitWrites: c.AutocommitWrites - c0.AutocommitWrites,
		AutocommitReads:  c.AutocommitReads - c0.AutocommitReads,
		RoundTrips:       c.RoundTrips - c0.RoundTrips,
	}
	for k, v := range c.Statements {
		if v -= c0.Statements[k]; v != 0 {
			d.Statements[k] = v
		}
	}
	return d
}

// plus is c and c2 together.
func (c dbCounts) plus(c2 dbCounts) dbCounts {
	d := dbCounts{
		Statements:       maps.Clone(c.Statements),
		Commits:          c.Commits + c2.Commits,
		Rollbacks:        c.Rollbacks + c2.Rollbacks,
		AutocommitWrites: c.AutocommitWrites + c2.AutocommitWrites,
		AutocommitReads:  c.AutocommitReads + c2.AutocommitReads,
		RoundTrips:       c.RoundTrips + c2.RoundTrips,
	}
	if d.Statements == nil {
		d.Statements = map[string]int64{}
	}
	for k, v := range c2.Statements {
		d.Statements[k] += v
	}
	return d
}

// statements is the number of statements counted.
func (c dbCounts) statements() int64 {
	var n int64
	for _, v := range c.Statements {
		n += v
	}
	return n
}

// writingCommits are the commits that write: COMMIT statements and
// statements outside a transaction that write, each committed on its own.
func (c dbCounts) writingCommits() int64 { return c.Commits + c.AutocommitWrites }

// transactions are the transactions PostgreSQL ran for these statements:
// one per BEGIN, one per statement outside a transaction.
func (c dbCounts) transactions() int64 {
	return c.Statements["begin"] + c.AutocommitWrites + c.AutocommitReads
}

// dbStats reads the server's statement counts; with flush, it first makes
// the server's idle connections publish their pg_stat_database counts.
func (s *serverProc) dbStats(ctx context.Context, flush bool) (dbStats, error) {
	method, path := http.MethodGet, "/debug/db-stats"
	if flush {
		method, path = http.MethodPost, "/debug/db-stats/flush"
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, nil)
	if err != nil {
		return dbStats{}, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return dbStats{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return dbStats{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return dbStats{}, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return parseDBStats(body)
}
