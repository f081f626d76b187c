// Package redistest gives tests a real Redis: the one REDIS_URL names, or
// the server on 127.0.0.1:6379, or one started for the test from the
// machine's redis-server (apt-get install redis-server provides it).
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client returns a client of a Redis that answers, and a key prefix of
// the test's own, so that tests sharing a server never see each other's
// keys. The client honours context deadlines, as redisfilter requires.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opts := &redis.Options{Addr: "127.0.0.1:6379"}
	if u := os.Getenv("REDIS_URL"); u != "" {
		var err error
		if opts, err = redis.ParseURL(u); err != nil {
			t.Fatalf("redistest: REDIS_URL: %v", err)
		}
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		if os.Getenv("REDIS_URL") != "" {
			t.Fatalf("redistest: REDIS_URL does not answer: %v", err)
		}
		rdb = Start(t).Client(t)
	} else {
		t.Cleanup(func() { _ = rdb.Close() })
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return rdb, "test:" + hex.EncodeToString(b[:]) + ":"
}

// Server is a redis-server started for one test, which the test may stop
// or pause to see what its code does without Redis.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// Start starts a redis-server of the test's own on a free port, stopped
// when the test ends. Without the binary the test fails under CI and is
// skipped elsewhere, saying what to install.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redistest: redis-server is not installed (apt-get install redis-server)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{dir: t.TempDir()}
	if err := s.start(bin, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// start runs redis-server on port, or on a free one when port is 0, and
// returns once it accepts connections, which it announces on its log.
func (s *Server) start(bin string, port int) error {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("redistest: find a free port: %w", err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--loglevel", "notice")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var last []string
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "Ready to accept connections") {
				ready <- nil
				for sc.Scan() { // keep the pipe drained
				}
				return
			}
			last = append(last, line)
		}
		ready <- fmt.Errorf("redistest: redis-server exited before it was ready:\n%s", strings.Join(last, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			_ = s.cmd.Wait()
		}
		return err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		return errors.New("redistest: redis-server did not get ready in 10s")
	}
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop kills the server, as a crash would.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Restart starts the server again on its port, empty.
func (s *Server) Restart() error {
	s.Stop()
	_, port, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(port)
	return s.start(s.cmd.Path, n)
}

// Snapshot saves the server's data (SAVE) and returns the snapshot, as
// an operator's backup or a replica's state at that moment.
func (s *Server) Snapshot(t testing.TB) []byte {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	if err := rdb.Save(context.Background()).Err(); err != nil {
		t.Fatalf("redistest: SAVE: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "dump.rdb"))
	if err != nil {
		t.Fatalf("redistest: read the snapshot: %v", err)
	}
	return b
}

// RestartFrom kills the server and starts it again on its port from
// snapshot, as a restore from a backup, or a failover to a replica that
// had not received the writes since, does: every write after the
// snapshot is lost.
func (s *Server) RestartFrom(snapshot []byte) error {
	s.Stop()
	if err := os.WriteFile(filepath.Join(s.dir, "dump.rdb"), snapshot, 0o600); err != nil {
		return fmt.Errorf("redistest: write the snapshot: %w", err)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(port)
	return s.start(s.cmd.Path, n)
}

// Pause stops the server's process without closing its connections, as
// a server that stopped answering; Resume lets it go on.
func (s *Server) Pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }
