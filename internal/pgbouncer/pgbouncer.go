// Package pgbouncer runs a real PgBouncer in front of a test's database,
// for tests of clients behind a connection pooler.
//
// Tests that use it need the pgbouncer binary (Debian's pgbouncer
// package; .ci/run installs it). Without it they are skipped, saying so,
// except under CI (CI set), where they fail.
package pgbouncer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgen/idemgen/internal/pglocal"
)

// Pool modes, PgBouncer's pool_mode.
const (
	// Transaction hands each transaction, and each statement outside one,
	// to any free server session.
	Transaction = "transaction"
	// Session gives a client one server session for as long as it stays
	// connected.
	Session = "session"
)

const (
	// startTimeout bounds how long PgBouncer may take to accept a
	// connection that reaches the database.
	startTimeout = 30 * time.Second
	// stopTimeout bounds an immediate shutdown before the process is
	// killed.
	stopTimeout = 10 * time.Second
	// poolSize is the server sessions PgBouncer opens per database and
	// user: more than one, so that a client's transactions can land on
	// different sessions in transaction mode, and few enough to leave
	// the server's max_connections to the other tests.
	poolSize = 8
)

// Start runs PgBouncer with pool_mode = mode (Transaction or Session) on
// a free port of 127.0.0.1, in front of the database upstream connects
// to, such as a URL from pgtest.NewDatabase, and returns a URL that
// connects to that database through it. PgBouncer lets every client in
// (auth_type = trust) and logs in to the server as upstream does. It
// stops when the test ends; call Start after pgtest.NewDatabase, so that
// it stops before the database is dropped.
func Start(t testing.TB, mode, upstream string) string {
	t.Helper()
	if mode != Transaction && mode != Session {
		t.Fatalf("pgbouncer: pool mode %q, want %q or %q", mode, Transaction, Session)
	}
	bin := binary(t)

	server, err := pgconn.ParseConfig(upstream)
	if err != nil {
		t.Fatalf("pgbouncer: parsing the upstream database's URL: %v", err)
	}
	for what, v := range map[string]string{"host": server.Host, "user": server.User, "database": server.Database} {
		if !plain.MatchString(v) {
			t.Fatalf("pgbouncer: the upstream %s %q holds characters this helper does not quote for PgBouncer's connection string", what, v)
		}
	}

	cred, err := pglocal.RunAs()
	if err != nil {
		t.Fatalf("pgbouncer: PgBouncer refuses to run as root: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	port, err := freePort()
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	files := map[string]string{
		ini: config(mode, port, server),
		// The server login's password, if any; the client's user must be
		// listed here for auth_type = trust.
		filepath.Join(dir, "users.txt"): quote(server.User) + " " + quote(server.Password) + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
	}
	if cred != nil {
		for _, name := range []string{dir, ini, filepath.Join(dir, "users.txt")} {
			if err := os.Chown(name, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatalf("pgbouncer: handing %s to uid %d: %v", name, cred.Uid, err)
			}
		}
	}

	var log lockedBuffer
	cmd := exec.Command(bin, ini)
	cmd.Dir = dir // the unprivileged user may not be able to read ours
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = sysProcAttr(cred)
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgbouncer: starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// SIGTERM is PgBouncer's immediate shutdown: it closes its client
		// and server connections without waiting for them.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("pgbouncer: did not stop within %v of SIGTERM; killed it", stopTimeout)
		}
		if t.Failed() {
			t.Logf("pgbouncer (pool_mode = %s) log:\n%s", mode, tail(log.String()))
		}
	})

	u := (&url.URL{
		Scheme:   "postgres",
		User:     url.User(server.User),
		Host:     net.JoinHostPort("127.0.0.1", fmt.Sprint(port)),
		Path:     "/" + server.Database,
		RawQuery: "sslmode=disable",
	}).String()
	if err := waitReady(u, exited); err != nil {
		t.Fatalf("pgbouncer: %v\npgbouncer log:\n%s", err, tail(log.String()))
	}
	return u
}

// plain matches what goes into PgBouncer's connection string unquoted.
var plain = regexp.MustCompile(`^[A-Za-z0-9_./:,-]+$`)

// binary returns the pgbouncer executable, or skips the test, or fails it
// under CI.
func binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	// Debian installs it in /usr/sbin, off a non-root user's PATH.
	if fi, err := os.Stat("/usr/sbin/pgbouncer"); err == nil && fi.Mode()&0o111 != 0 {
		return "/usr/sbin/pgbouncer"
	}
	const how = "install it (apt-get install pgbouncer, as .ci/run does) to run the tests through a real PgBouncer"
	if os.Getenv("CI") != "" {
		t.Fatalf("pgbouncer is not installed, and CI must run the tests through it: %s", how)
	}
	t.Skipf("pgbouncer is not installed, so this test does not run: %s", how)
	return ""
}

// config is PgBouncer's ini: one database, reached as server says, on
// 127.0.0.1:port only.
func config(mode string, port int, server *pgconn.Config) string {
	db := fmt.Sprintf("host=%s port=%d dbname=%s", server.Host, server.Port, server.Database)
	return fmt.Sprintf(`[databases]
%s = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = users.txt
pool_mode = %s
default_pool_size = %d
max_client_conn = 200
server_tls_sslmode = %s
server_login_retry = 1
`, server.Database, db, port, mode, poolSize, serverTLS(server))
}

// serverTLS is the server_tls_sslmode that matches upstream's sslmode as
// far as PgBouncer can without certificates of its own.
func serverTLS(server *pgconn.Config) string {
	if server.TLSConfig == nil {
		return "disable"
	}
	for _, fb := range server.Fallbacks {
		if fb.TLSConfig == nil {
			return "prefer"
		}
	}
	return "require"
}

// quote quotes a field of PgBouncer's auth_file.
func quote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// waitReady polls connections to u until one reaches the database
// through PgBouncer, which then has logged in to the server, or until
// PgBouncer exits or startTimeout passes.
func waitReady(u string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		err := ping(u)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no connection through it within %v: %w", startTimeout, err)
		}
		select {
		case <-exited:
			return errors.New("it exited before accepting connections")
		case <-retry.C:
		}
	}
}

func ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// freePort asks the kernel for an unused port. Another process could take
// it before PgBouncer binds it; PgBouncer then exits, saying so in its log.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is PgBouncer's output, written by the process's copying
// goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail keeps the last lines of s, where the reason for a failure is.
func tail(s string) string {
	const maxLines = 30
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}
