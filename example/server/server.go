// Package server runs the example orders API: it finds its database,
// applies the migrations and serves the generated handler.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pglocal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures Start; the zero value serves on a free loopback port
// against the local PostgreSQL.
type Config struct {
	// Addr is the listen address; "" picks a free port on 127.0.0.1.
	Addr string
	// DatabaseURL is the PostgreSQL to use; "" finds or starts a local one
	// (see pglocal) and uses its idemgen_example database.
	DatabaseURL string
	// WorkDelay makes createOrder wait inside its attempt.
	WorkDelay time.Duration
	Logger    *slog.Logger
}

// Server is a running orders API.
type Server struct {
	// URL is the base URL it serves, e.g. http://127.0.0.1:8080.
	URL   string
	http  *http.Server
	pool  *pgxpool.Pool
	local *pglocal.Server
	done  chan error
}

// Handler serves impl with the idempotency layer on the Postgres store.
func Handler(impl gen.IdempotentServer[pgx.Tx], pool *pgxpool.Pool, log *slog.Logger) http.Handler {
	return gen.NewIdempotentHandler(impl, pgstore.New(pool), gen.IdempotentHandlerOptions{
		Options: idem.Options{Scope: orders.Scope, Logger: log},
	})
}

// Start connects, migrates and starts serving.
func Start(ctx context.Context, cfg Config) (s *Server, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s = &Server{done: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	url := cfg.DatabaseURL
	if url == "" {
		if s.local, err = pglocal.Start(ctx, pglocal.Options{Logger: log}); err != nil {
			return nil, err
		}
		if url, err = exampleDatabase(ctx, s.local.URL); err != nil {
			return nil, err
		}
	}
	if s.pool, err = pgxpool.New(ctx, url); err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	if err := orders.Migrate(ctx, s.pool); err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.URL = "http://" + ln.Addr().String()
	svc := &orders.Service{Pool: s.pool, WorkDelay: cfg.WorkDelay}
	s.http = &http.Server{Handler: Handler(svc, s.pool, log), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.http.Serve(ln) }()
	log.Info("orders-api: listening", "url", s.URL, "work_delay", cfg.WorkDelay)
	return s, nil
}

// exampleDatabase creates the example's database on a local server if it
// is missing, and returns its URL.
func exampleDatabase(ctx context.Context, adminURL string) (string, error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'idemgen_example')`).Scan(&exists); err != nil {
		return "", fmt.Errorf("find the example database: %w", err)
	}
	if !exists {
		_, err := conn.Exec(ctx, `CREATE DATABASE idemgen_example`)
		var pgErr interface{ SQLState() string }
		// Another process may have created it at the same moment.
		if err != nil && !(errors.As(err, &pgErr) && pgErr.SQLState() == "42P04") {
			return "", fmt.Errorf("create the example database: %w", err)
		}
	}
	return fmt.Sprintf("postgres://%s@%s:%d/idemgen_example?sslmode=disable", cfg.User, cfg.Host, cfg.Port), nil
}

// Wait blocks until the server stops serving.
func (s *Server) Wait() error {
	err := <-s.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving, waiting up to five seconds for requests in flight,
// and closes the database (and a cluster started for it).
func (s *Server) Close() error {
	var errs []error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errs = append(errs, s.http.Shutdown(ctx))
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.local != nil {
		errs = append(errs, s.local.Close())
	}
	return errors.Join(errs...)
}
