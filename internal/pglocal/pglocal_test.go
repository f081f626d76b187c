package pglocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func selectOne(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "select 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("select 1 = %d, %v", n, err)
	}
}

func TestForceClusterStartsAndRemovesCluster(t *testing.T) {
	srv, err := Start(t.Context(), Options{Logger: testLogger(t), ForceCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.dir
	t.Cleanup(func() { _ = srv.Close() }) // in case an assertion below fails

	if !srv.Started {
		t.Error("Started = false for a forced cluster")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster dir: %v", err)
	}
	selectOne(t, srv.URL)

	// Stop and Resume keep the data and the address.
	conn, err := pgx.Connect(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `CREATE TABLE kept (n int)`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := conn.Ping(t.Context()); err == nil {
		t.Error("a session survived Stop")
	}
	if err := srv.Resume(t.Context()); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	conn, err = pgx.Connect(t.Context(), srv.URL)
	if err != nil {
		t.Fatalf("connect after Resume: %v", err)
	}
	if _, err := conn.Exec(t.Context(), `SELECT count(*) FROM kept`); err != nil {
		t.Fatalf("data after Resume: %v", err)
	}
	conn.Close(t.Context())

	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cluster dir %s still there after Close (stat err %v)", dir, err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBadDatabaseURLIsNamed(t *testing.T) {
	// A port that was just free is very likely to refuse connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:"+strconv.Itoa(port)+"/postgres?sslmode=disable")
	srv, err := Start(t.Context(), Options{Logger: testLogger(t)})
	if err == nil {
		srv.Close()
		t.Fatal("Start succeeded with an unreachable DATABASE_URL")
	}
	if !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("error does not name DATABASE_URL: %v", err)
	}
}

// TestDefaultStart checks that the zero Options find or start something
// usable, whatever this machine offers.
func TestDefaultStart(t *testing.T) {
	srv, err := Start(t.Context(), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	selectOne(t, srv.URL)
}

func TestStopRefusesAServerNotStarted(t *testing.T) {
	found := &Server{URL: "postgres://postgres@127.0.0.1:5432/postgres"}
	if err := found.Stop(t.Context()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Stop of a found server: %v, want ErrNotStarted", err)
	}
	if err := found.Resume(t.Context()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Resume of a found server: %v, want ErrNotStarted", err)
	}
}

// holdEnv makes the test binary a process that starts a throwaway
// cluster, prints its folder and URL, and waits to be killed.
const holdEnv = "PGLOCAL_TEST_HOLD_CLUSTER"

func TestMain(m *testing.M) {
	if os.Getenv(holdEnv) == "1" {
		srv, err := Start(context.Background(), Options{ForceCluster: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(srv.dir, srv.URL)
		select {} // until killed
	}
	os.Exit(m.Run())
}

// A process killed with its throwaway cluster running leaves the server
// and its folder behind; the next cluster started stops and removes them.
func TestStaleClusterIsSwept(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"=1")
	cmd.Stderr = t.Output()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the holding process printed no cluster: %v", err)
	}
	dir, url, _ := strings.Cut(strings.TrimSpace(line), " ")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	selectOne(t, url) // the killed process's server runs on
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed process's cluster folder: %v", err)
	}

	srv, err := Start(t.Context(), Options{Logger: testLogger(t), ForceCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed process's cluster folder %s is still there (stat: %v)", dir, err)
	}
	if conn, err := pgx.Connect(t.Context(), url); err == nil {
		conn.Close(t.Context())
		t.Errorf("the killed process's server at %s still answers", url)
	}
	// A cluster whose owner lives is left alone: this test's own.
	if _, err := os.Stat(srv.dir); err != nil {
		t.Errorf("the new cluster's folder: %v", err)
	}
}
