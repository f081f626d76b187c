package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The servers scenarios can be run against. Each is started on first use
// and kept for the run; the orders-api always runs, since its migrations
// make the tables the others use too.
const (
	// backendOrders is the example orders-api (example/cmd/orders-api).
	backendOrders = "orders-api"
	// backendFiber is bench/fiberpeer: createOrder behind Fiber v3's
	// idempotency middleware with its Redis storage.
	backendFiber = "fiber"
	// backendOrdersRedis is the orders-api with -redis-url: its Redis
	// replay filter in front of the key store.
	backendOrdersRedis = "orders-api-redis"
)

// backend is a server process and the clients that drive it.
type backend struct {
	name    string
	srv     *serverProc
	clients []*client
}

// backendEnv is what starting a backend needs.
type backendEnv struct {
	root, tmp string
	// dbURL and redisAddr are what the servers connect to: across the
	// hop's proxy with -hop.
	dbURL     string
	redisAddr string
	ordersBin string
	logTo     io.Writer
	conns     int
	p         progress
}

// needsRedis says which backends need Redis running.
func needsRedis(name string) bool { return name == backendFiber || name == backendOrdersRedis }

// startBackend starts the server name and its clients.
func startBackend(ctx context.Context, env backendEnv, name string) (*backend, error) {
	// Each server's connections carry its name, so that its pool can
	// be told from the others' in pg_stat_activity.
	dbURL, err := withParam(env.dbURL, "application_name", appName(name))
	if err != nil {
		return nil, err
	}
	var srv *serverProc
	switch name {
	case backendOrders:
		srv, err = startServer(ctx, env.ordersBin, dbURL, env.logTo)
	case backendOrdersRedis:
		srv, err = startServer(ctx, env.ordersBin, dbURL, env.logTo, "-redis-url", "redis://"+env.redisAddr+"/0")
	case backendFiber:
		env.p.printf("building bench/fiberpeer (a module of its own)")
		var bin string
		if bin, err = goBuild(ctx, filepath.Join(env.root, "bench", "fiberpeer"), env.tmp, "fiberpeer", "."); err != nil {
			return nil, err
		}
		// The keys in Redis are this run's, under a prefix with this
		// process's ID: fiberpeer deletes them at start and exit, and
		// those of runs no longer alive.
		prefix := fiberKeyBase + strconv.Itoa(os.Getpid()) + ":"
		srv, err = startProcess(ctx, exec.Command(bin, "-addr", "127.0.0.1:0", "-db-stats", "-redis", env.redisAddr, "-key-prefix", prefix), dbURL, env.logTo)
	default:
		return nil, fmt.Errorf("no backend %q", name)
	}
	if err != nil {
		return nil, err
	}
	env.p.printf("%s listening on %s", name, srv.url)
	b := &backend{name: name, srv: srv}
	for i := range env.conns {
		b.clients = append(b.clients, newClient(i, srv.url))
	}
	return b, nil
}

// appName is the application_name of backend name's connections.
func appName(name string) string { return "idemgen-bench-" + name }

// fiberKeyBase starts fiberpeer's keys in Redis (its keyBase).
const fiberKeyBase = "idemgen-bench:fiber:"

func (b *backend) stop() {
	for _, c := range b.clients {
		c.close()
	}
	b.srv.stop()
}

// redisUnlink deletes keys from the Redis at addr, in one command.
func redisUnlink(ctx context.Context, addr string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// A RESP array of bulk strings: UNLINK key...
	cmd := []byte("*" + strconv.Itoa(len(keys)+1) + "\r\n$6\r\nUNLINK\r\n")
	for _, k := range keys {
		cmd = append(cmd, "$"+strconv.Itoa(len(k))+"\r\n"+k+"\r\n"...)
	}
	if _, err := c.Write(cmd); err != nil {
		return err
	}
	// The answer: ":N\r\n", the number deleted.
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, ":") {
		return fmt.Errorf("UNLINK answered %q", strings.TrimSpace(line))
	}
	return nil
}

// redisUp tells whether something answers PING at addr as Redis does.
func redisUp(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return errors.New("no +PONG to PING")
	}
	return nil
}
