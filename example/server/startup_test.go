package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// A server that cannot start says why and what to do, and never panics.
func TestStartupErrors(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want []string
	}{
		{"malformed DATABASE_URL", server.Config{DatabaseURL: "postgres://%zz"}, []string{"DATABASE_URL", "fix DATABASE_URL, or unset it"}},
		{"unreachable DATABASE_URL", server.Config{DatabaseURL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=5"}, []string{"DATABASE_URL", "fix DATABASE_URL, or unset it"}},
		{"unknown crash point", server.Config{CrashAt: "after-lunch"}, []string{`crash point "after-lunch" is unknown`, "after-charge"}},
		{"address in use", server.Config{Addr: busy.Addr().String()}, []string{"listen on " + busy.Addr().String(), "-addr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quiet
			srv, err := server.Start(context.Background(), tc.cfg)
			if err == nil {
				srv.Close()
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Two servers starting at once on a new database both come up: the key
// store's migrations and the example's own schema run under one lock.
func TestTwoServersStartOnANewDatabase(t *testing.T) {
	url := pgtest.NewDatabase(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	servers := make([]*server.Server, 2)
	errs := make([]error, 2)
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = server.Start(context.Background(), server.Config{DatabaseURL: url, Logger: quiet})
		}()
	}
	wg.Wait()
	for i := range servers {
		if errs[i] != nil {
			t.Errorf("server %d: %v", i, errs[i])
			continue
		}
		servers[i].Close()
	}
}
