// Package pglocal finds a PostgreSQL server to use locally, or starts a
// throwaway cluster when there is none. It is shared by tests and by the
// example server binary, so it must not depend on package testing.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// defaultURL is the conventional local server; trust auth is assumed,
	// as on developer machines and CI.
	defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

	// probeTimeout keeps the fallback to a throwaway cluster quick when
	// nothing listens on the default address.
	probeTimeout = 2 * time.Second

	// verifyTimeout bounds the check of an explicit DATABASE_URL, which may
	// point at a slower, remote server.
	verifyTimeout = 10 * time.Second
)

// Options configures Start. The zero value works.
type Options struct {
	Logger *slog.Logger // nil: discard

	// ForceCluster skips DATABASE_URL and the 127.0.0.1:5432 probe and
	// always starts a throwaway cluster.
	ForceCluster bool
}

// Server is a PostgreSQL server that can be connected to.
type Server struct {
	// URL connects as a superuser (or whatever DATABASE_URL grants) to an
	// administrative database, e.g.
	// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
	URL string
	// Started is true when Start launched a throwaway cluster that Close
	// will stop and delete.
	Started bool

	dir       string              // temp dir holding data dir, socket and log
	pgCtl     string              // pg_ctl binary that started the cluster
	pgOpts    string              // the server options it was started with
	cred      *syscall.Credential // unprivileged user when running as root
	log       *slog.Logger
	closeOnce sync.Once
	closeErr  error
}

// Start returns a usable server: DATABASE_URL when set, else a server on
// 127.0.0.1:5432, else a freshly started throwaway cluster.
func Start(ctx context.Context, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	if !opts.ForceCluster {
		if url := os.Getenv("DATABASE_URL"); url != "" {
			// An explicit setting that does not work is a mistake to
			// report, not a reason to silently use something else.
			if err := ping(ctx, url, verifyTimeout); err != nil {
				return nil, fmt.Errorf("pglocal: DATABASE_URL is set but cannot be connected to (fix or unset DATABASE_URL): %w", err)
			}
			log.Info("pglocal: using PostgreSQL from DATABASE_URL")
			return &Server{URL: url, log: log}, nil
		}

		err := ping(ctx, defaultURL, probeTimeout)
		if err == nil {
			log.Info("pglocal: using PostgreSQL on 127.0.0.1:5432")
			return &Server{URL: defaultURL, log: log}, nil
		}
		log.Info("pglocal: no usable PostgreSQL on 127.0.0.1:5432, starting a throwaway cluster", "probe_error", err)
	}

	return startCluster(ctx, log)
}

// Close stops a throwaway cluster and removes its files. It is a no-op for
// servers that Start did not launch, and safe to call more than once.
func (s *Server) Close() error {
	if !s.Started {
		return nil
	}
	s.closeOnce.Do(func() {
		// Immediate mode: the data is thrown away, so a clean shutdown
		// checkpoint would only cost time.
		stopErr := s.run(context.Background(), s.pgCtl, "stop", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w")
		if stopErr != nil {
			stopErr = fmt.Errorf("pglocal: stopping cluster in %s: %w", s.dir, stopErr)
		}
		rmErr := os.RemoveAll(s.dir)
		if rmErr != nil {
			rmErr = fmt.Errorf("pglocal: removing cluster dir: %w", rmErr)
		}
		s.closeErr = errors.Join(stopErr, rmErr)
		if s.closeErr == nil {
			s.log.Info("pglocal: stopped throwaway PostgreSQL cluster", "dir", s.dir)
		}
	})
	return s.closeErr
}

// ErrNotStarted is returned by Stop and Resume for a server that Start did
// not launch: one it found must not be stopped by a test.
var ErrNotStarted = errors.New("pglocal: not a cluster this process started")

// Stop shuts a throwaway cluster down the way an administrator restarting
// it does (fast mode: sessions are terminated), keeping its data, so that
// tests can watch clients through a database outage. Resume starts it
// again.
func (s *Server) Stop(ctx context.Context) error {
	if !s.Started {
		return ErrNotStarted
	}
	if err := s.run(ctx, s.pgCtl, "stop", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w"); err != nil {
		return fmt.Errorf("pglocal: stopping cluster in %s: %w", s.dir, err)
	}
	return nil
}

// Resume starts a cluster that Stop stopped, on the same port.
func (s *Server) Resume(ctx context.Context) error {
	if !s.Started {
		return ErrNotStarted
	}
	logFile := filepath.Join(s.dir, "postgres.log")
	if err := s.run(ctx, s.pgCtl, "start", "-w", "-D", filepath.Join(s.dir, "data"), "-l", logFile, "-o", s.pgOpts); err != nil {
		return fmt.Errorf("pglocal: restarting cluster in %s: %w\npostgres log tail:\n%s", s.dir, err, logTail(logFile))
	}
	return nil
}

func startCluster(ctx context.Context, log *slog.Logger) (_ *Server, err error) {
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}

	s := &Server{
		Started: true,
		pgCtl:   filepath.Join(binDir, "pg_ctl"),
		log:     log,
	}

	// initdb and postgres refuse to run as root, so drop to an existing
	// unprivileged user for them instead of relying on su/runuser.
	var uid, gid int
	if os.Geteuid() == 0 {
		s.cred, uid, gid, err = unprivilegedUser()
		if err != nil {
			return nil, err
		}
	}

	s.sweepStale(log)
	s.dir, err = os.MkdirTemp("", clusterPrefix)
	if err != nil {
		return nil, fmt.Errorf("pglocal: creating temp dir for cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	defer func() {
		if err != nil {
			// Best effort: the cluster may not be running at all.
			_ = s.run(context.Background(), s.pgCtl, "stop", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w")
			_ = os.RemoveAll(s.dir)
		}
	}()
	if s.cred != nil {
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return nil, fmt.Errorf("pglocal: handing %s to uid %d: %w", s.dir, uid, err)
		}
	}

	dataDir := filepath.Join(s.dir, "data")
	logFile := filepath.Join(s.dir, "postgres.log")

	// Locale C and UTF8 keep initdb independent of the host's locale
	// settings; --no-sync because the data is disposable.
	if err := s.run(ctx, filepath.Join(binDir, "initdb"),
		"-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "--locale=C", "-E", "UTF8"); err != nil {
		return nil, fmt.Errorf("pglocal: initdb in %s failed (set DATABASE_URL or run a server on 127.0.0.1:5432 to avoid a throwaway cluster): %w", s.dir, err)
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}

	// The socket goes in our own dir so it cannot clash with a system
	// server's /var/run/postgresql or need write access there. pg_ctl
	// passes -o through /bin/sh, hence the quoting.
	s.pgOpts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off", port, shellQuote(s.dir))
	if err := s.run(ctx, s.pgCtl, "start", "-w", "-D", dataDir, "-l", logFile, "-o", s.pgOpts); err != nil {
		return nil, fmt.Errorf("pglocal: starting cluster on port %d failed: %w\npostgres log tail:\n%s", port, err, logTail(logFile))
	}

	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := ping(ctx, s.URL, verifyTimeout); err != nil {
		return nil, fmt.Errorf("pglocal: cluster started but cannot be connected to: %w\npostgres log tail:\n%s", err, logTail(logFile))
	}

	log.Info("pglocal: started throwaway PostgreSQL cluster", "dir", s.dir, "port", port, "bin", binDir)
	return s, nil
}

// A throwaway cluster lives in a folder of the temp dir named with
// clusterPrefix, whose ownerFile holds the process ID that started it.
const (
	clusterPrefix = "pglocal-"
	ownerFile     = "owner.pid"
)

// sweepStale stops and removes the throwaway clusters of processes that
// ended without closing them (a test binary killed at its deadline, an
// interrupted run): their servers would keep running, and their folders
// fill the temp dir. A cluster whose owner is alive, or whose server runs
// with no owner recorded, is left alone.
func (s *Server) sweepStale(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterPrefix+"*"))
	for _, dir := range dirs {
		data := filepath.Join(dir, "data")
		postmaster, running := postmasterOf(data)
		switch owner, ok := ownerOf(dir); {
		case ok && alive(owner):
			continue
		case !ok && (running || !oldEnough(dir)):
			continue // from before owners were recorded, or being made now
		}
		if running {
			cmd := exec.Command(s.pgCtl, "stop", "-D", data, "-m", "immediate", "-w")
			if s.cred != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				log.Warn("pglocal: could not stop the throwaway cluster of a process that is gone", "dir", dir, "postmaster", postmaster, "error", err, "output", tail(string(out)))
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("pglocal: could not remove the throwaway cluster of a process that is gone", "dir", dir, "error", err)
			continue
		}
		log.Info("pglocal: removed the throwaway cluster of a process that is gone", "dir", dir)
	}
}

// ownerOf reads the process ID recorded in a cluster's folder.
func ownerOf(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// postmasterOf returns the process ID of the server running on data, if
// one runs.
func postmasterOf(data string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0 && alive(pid)
}

// alive reports whether a process with this ID exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// oldEnough reports whether a folder without an owner was made long
// enough ago that it is not being made now.
func oldEnough(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && time.Since(fi.ModTime()) > time.Minute
}

// run executes a PostgreSQL tool, as the unprivileged user when needed, and
// includes the tail of its output in the error.
func (s *Server) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	// The unprivileged user may not be able to read our working directory.
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), args[0], err, tail(string(out)))
	}
	return nil
}

// findBinDir returns a directory holding both initdb and pg_ctl, so the two
// always come from the same PostgreSQL version.
func findBinDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	// Debian installs the tools only under a versioned directory.
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versioned, func(a, b string) int {
		return -compareVersion(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
	})
	dirs = append(dirs, versioned...)

	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("pglocal: no PostgreSQL found: set DATABASE_URL, run a server on 127.0.0.1:5432, or install postgresql so initdb and pg_ctl are on PATH or in /usr/lib/postgresql/<version>/bin")
}

// compareVersion orders directory names like "9.6", "15" and "16" by number;
// names that are not numbers sort first.
func compareVersion(a, b string) int {
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return -1
		}
		return f
	}
	switch fa, fb := num(a), num(b); {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// RunAs returns the credential to run a PostgreSQL tool as: nil when not
// running as root, else an existing unprivileged account's, the one a
// throwaway cluster runs as. Tools that refuse to run as root, such as
// postgres and pgbouncer, are started with it.
func RunAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	cred, _, _, err := unprivilegedUser()
	return cred, err
}

// unprivilegedUser picks an existing non-root account to run PostgreSQL as.
func unprivilegedUser() (*syscall.Credential, int, int, error) {
	for _, name := range []string{"nobody", "postgres"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		// Empty Groups drops root's supplementary groups.
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
	}
	return nil, 0, 0, errors.New("pglocal: running as root and no unprivileged user (nobody or postgres) exists to run PostgreSQL as; create one, run as non-root, or set DATABASE_URL")
}

// freePort asks the kernel for an unused port. Another process could take
// it before postgres binds it; pg_ctl then fails with the reason in the log.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pglocal: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ping(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// logTail returns the end of the postgres log, where the reason for a
// failed start is.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(string(b))
}

// tail keeps the last lines of s so errors stay readable.
func tail(s string) string {
	const maxLines = 20
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}
