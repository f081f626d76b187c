// Command orders-api serves the example orders-and-payments API on
// PostgreSQL: createOrder is idempotent in one transaction, createPayment
// in phases around a call to a payment provider.
//
//	go run ./example/cmd/orders-api [-addr 127.0.0.1:8080] [-work-delay 2s]
//	                                [-psp-url http://127.0.0.1:9090] [-crash-at after-charge]
//	                                [-db-stats] [-drain-timeout 25s] [-redis-url redis://127.0.0.1:6379/0]
//
// DATABASE_URL names the database; without it the API uses the local
// PostgreSQL on 127.0.0.1:5432, or starts a throwaway one. Without
// -psp-url it starts the fake payment provider inside the process; run
// `go run ./example/cmd/fake-psp` for one that outlives a crash.
//
// On SIGTERM or an interrupt it drains: it refuses new connections at
// once, lets the requests in flight finish and store their responses for
// up to -drain-timeout, then stops its janitor and exits 0. Requests still
// running when the timeout passes are cut off (their attempts roll back,
// so a client's retry runs them again) and it exits 1. A second signal
// ends it at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/bench/peers"
	"github.com/idemgen/idemgen/bench/realistic"
	"github.com/idemgen/idemgen/example/server"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	workDelay := flag.Duration("work-delay", 0, "make createOrder wait this long inside its attempt, holding its key (shows the 409 case)")
	pspURL := flag.String("psp-url", "", "the payment provider's base `URL`, such as the one go run ./example/cmd/fake-psp prints (default: a fake one inside this process)")
	crashAt := flag.String("crash-at", "", "die abruptly (SIGKILL) when createPayment reaches this point: after-claim, after-charge or before-response")
	dbStats := flag.Bool("db-stats", false, "count the statements sent to PostgreSQL and serve the counts as JSON at GET /debug/db-stats (for go run ./bench)")
	drainTimeout := flag.Duration("drain-timeout", 25*time.Second, "on SIGTERM, how long requests in flight may take to finish before they are cut off; keep it below the orchestrator's grace period (Kubernetes: 30s)")
	completeAfter := flag.Duration("complete-after", 0, "finish a payment its client abandoned this long after its lease passed (default: the spec's complete-after, 10m)")
	completerInterval := flag.Duration("completer-interval", time.Minute, "time between the completer's runs")
	redisURL := flag.String("redis-url", "", "put a Redis replay filter in front of the key store, such as redis://127.0.0.1:6379/0: replays of completed keys are answered from Redis, everything else by PostgreSQL (default: none)")
	benchPeers := flag.Bool("bench-peers", false, "also serve the benchmark's hand-written idempotency designs under /peer/ and its four-statement endpoint under /realistic/ (for go run ./bench)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// go-redis prints each failed dial on its own, past the log: keep its
	// lines in the log, at debug level, since the replay filter warns once
	// when Redis fails and says when it answers again.
	redis.SetLogger(redisLog{log})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := server.Config{
		Addr:        *addr,
		DatabaseURL: os.Getenv("DATABASE_URL"),
		WorkDelay:   *workDelay,
		PSPURL:      *pspURL,
		CrashAt:     *crashAt,
		DBStats:     *dbStats,

		CompleteAfter:     *completeAfter,
		CompleterInterval: *completerInterval,
		RedisURL:          *redisURL,
		Logger:            log,
	}
	if *benchPeers {
		cfg.Routes = func(ctx context.Context, pool *pgxpool.Pool, mux *http.ServeMux) error {
			if err := peers.Mount(ctx, pool, mux); err != nil {
				return err
			}
			return realistic.Mount(ctx, pool, mux, log)
		}
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		log.Error("orders-api: start", "error", err)
		os.Exit(1)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Wait() }()
	select {
	case err := <-served:
		// Serving failed on its own: there is nothing left to drain for.
		log.Error("orders-api: serve", "error", err)
		srv.Close()
		os.Exit(1)
	case <-ctx.Done():
	}
	// From here on a second signal ends the process at once.
	stop()
	drainCtx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Error("orders-api: stopped after an unclean drain", "error", err)
		cancel()
		os.Exit(1)
	}
	log.Info("orders-api: stopped")
}

// redisLog is go-redis's logger on the server's.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
