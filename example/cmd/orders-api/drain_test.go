package main_test

// Drain tests: SIGTERM arrives while createOrder runs inside its attempt
// (held there by -work-delay).

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	draining = regexp.MustCompile(`msg="orders-api: draining".*`)
	drained  = regexp.MustCompile(`msg="orders-api: drained".*`)
	cutOff   = regexp.MustCompile(`msg="orders-api: drain timed out".*`)
)

// postAsync sends createOrder in the background.
func postAsync(url, key string) <-chan result {
	answered := make(chan result, 1)
	go func() {
		r, err := post(url, key, order)
		answered <- result{r, err}
	}()
	return answered
}

type result struct {
	reply
	err error
}

// terminate sends SIGTERM once the server's attempt holds its key, waits
// for the server to say it drains, and checks that it refuses new
// connections from then on.
func terminate(t *testing.T, pool *pgxpool.Pool, p *proc) {
	t.Helper()
	waitClaimed(t, pool, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	line := p.waitLog(t, draining, 30*time.Second)
	if !regexp.MustCompile(`\bin_flight=1\b`).MatchString(line) {
		t.Fatalf("the server drains with %q; want the held request in flight", line)
	}
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a new connection while draining: %v; want it refused", err)
	}
}

// exited waits up to within for the server to exit, and returns how.
func exited(t *testing.T, p *proc, within time.Duration) error {
	t.Helper()
	select {
	case <-p.eof:
	case <-time.After(within):
		t.Fatalf("the server did not exit within %v of SIGTERM:\n%s", within, p.log())
	}
	return p.cmd.Wait()
}

// SIGTERM while a request runs: the server refuses new connections, lets
// the request finish and store its response, then stops its janitor and
// exits 0 within -drain-timeout.
func TestGracefulDrain(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	const bound = time.Minute
	p := start(t, bin, dbURL, "-work-delay", "3s", "-drain-timeout", bound.String())
	answered := postAsync(p.url, "k1")
	sent := time.Now()
	terminate(t, pool, p)

	r := <-answered
	if r.err != nil || r.status != 201 {
		t.Fatalf("the request in flight at SIGTERM: %d %s %v; want its 201\n%s", r.status, r.body, r.err, p.log())
	}
	if err := exited(t, p, bound+10*time.Second); err != nil {
		t.Fatalf("exit after draining: %v; want 0\n%s", err, p.log())
	}
	if took := time.Since(sent); took > bound {
		t.Fatalf("the drain took %v, over its bound of %v", took, bound)
	}
	p.waitLog(t, drained, time.Second)
	if logs := p.log(); strings.Index(logs, `msg="orders-api: janitor stopped"`) < strings.Index(logs, `msg="orders-api: drained"`) {
		t.Fatalf("the janitor was not stopped after the requests had finished:\n%s", logs)
	}

	// The response was stored: the key's row holds it, and a new server
	// replays it.
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE key = 'k1' AND status = 'completed' AND response_status = 201`); n != 1 {
		t.Fatalf("%d completed rows for the drained request's key, want 1", n)
	}
	p2 := start(t, bin, dbURL)
	replay := mustPost(t, p2.url, "k1", order)
	if replay.status != 201 || replay.body != r.body || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after the drain: %d %v %s; want %s replayed", replay.status, replay.header, replay.body, r.body)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// A request that outlasts -drain-timeout is cut off when the bound passes:
// its attempt rolls back, the server says so and exits 1, and the client's
// retry on a new server runs the request once.
func TestDrainTimeoutCutsOff(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	const bound = time.Second
	p := start(t, bin, dbURL, "-work-delay", "1h", "-drain-timeout", bound.String())
	answered := postAsync(p.url, "k1")
	terminate(t, pool, p)

	err = exited(t, p, bound+30*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit after an overrun drain: %v; want exit status 1\n%s", err, p.log())
	}
	p.waitLog(t, cutOff, time.Second)
	if r := <-answered; r.err == nil {
		t.Fatalf("the cut-off request was answered %d %s", r.status, r.body)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`) + count(t, pool, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("the cut-off attempt left %d rows; want it rolled back", n)
	}
	p2 := start(t, bin, dbURL)
	r := retryWhileHeld(t, p2.url, "k1", order)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the cut-off: %d %v %s; want a first run's 201", r.status, r.header, r.body)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}
