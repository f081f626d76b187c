// Command orders-api serves the example orders-and-payments API on
// PostgreSQL: createOrder is idempotent in one transaction, createPayment
// in phases around a call to a payment provider.
//
//	go run ./example/cmd/orders-api [-addr 127.0.0.1:8080] [-work-delay 2s]
//	                                [-psp-url http://127.0.0.1:9090] [-crash-at after-charge]
//	                                [-db-stats] [-drain-timeout 25s] [-redis-url redis://127.0.0.1:6379/0]
//	go run ./example/cmd/orders-api -token acct_1
//
// DATABASE_URL names the database; without it the API uses the local
// PostgreSQL on 127.0.0.1:5432, or starts a throwaway one. Without
// -psp-url it starts the fake payment provider inside the process; run
// `go run ./example/cmd/fake-psp` for one that outlives a crash.
//
// Every request names its account in X-Account-Id, which scopes its
// idempotency keys, and carries that account's bearer token; others are
// answered 401 or 403 before any key is claimed. ORDERS_AUTH_SECRET is
// the secret tokens are made with (default: the public demo secret), and
// -token prints an account's token under it.
//
// The payment provider's webhook, POST /webhooks/psp, is keyed by the
// event's webhook-id: each event settles its payment once, and a
// redelivery gets the stored answer. The in-process fake provider sends
// its events there (-webhooks=false stops it). PSP_WEBHOOK_SECRET is the
// provider's webhook secret: with it, a delivery whose Standard Webhooks
// signature does not verify is a 401; without it nothing is verified.
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

// authSecretEnv names the environment variable that holds the secret of
// the bearer tokens: an environment variable, not a flag, so that it does
// not show in the process list.
const authSecretEnv = "ORDERS_AUTH_SECRET"

// webhookSecretEnv names the variable that holds the payment provider's
// webhook secret, which fake-psp reads too.
const webhookSecretEnv = "PSP_WEBHOOK_SECRET"

// usage comes before the flags in -h.
const usage = `Usage: orders-api [flags]
       orders-api -token ACCOUNT

Serves the example orders API. Each request names its account in the
X-Account-Id header and carries that account's bearer token:

  TOKEN=$(orders-api -token acct_1)
  curl -H 'X-Account-Id: acct_1' -H "Authorization: Bearer $TOKEN" ...

A request without a token is answered 401, one with another account's
token 403, before any idempotency key is claimed.

Environment:
  DATABASE_URL        the PostgreSQL to use (default: the one on
                      127.0.0.1:5432, or a throwaway cluster)
  ORDERS_AUTH_SECRET  the secret tokens are made with (default: a public
                      demo secret, with which anyone can make any
                      account's token; set a long random one, such as
                      the output of openssl rand -hex 32, anywhere but on
                      your own machine)
  PSP_WEBHOOK_SECRET  the payment provider's webhook secret (whsec_ and
                      base64): deliveries to POST /webhooks/psp must be
                      signed with it (default: none, nothing verified)

Flags:
`

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	token := flag.String("token", "", "print the bearer token of this account, made with the secret in ORDERS_AUTH_SECRET (or the demo secret), and exit")
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	workDelay := flag.Duration("work-delay", 0, "make createOrder wait this long inside its attempt, holding its key (shows the 409 case)")
	pspURL := flag.String("psp-url", "", "the payment provider's base `URL`, such as the one go run ./example/cmd/fake-psp prints (default: a fake one inside this process)")
	crashAt := flag.String("crash-at", "", "die abruptly (SIGKILL) when createPayment reaches this point: after-claim, after-charge, after-receipt or before-response")
	dbStats := flag.Bool("db-stats", false, "count the statements sent to PostgreSQL and serve the counts as JSON at GET /debug/db-stats (for go run ./bench)")
	drainTimeout := flag.Duration("drain-timeout", 25*time.Second, "on SIGTERM, how long requests in flight may take to finish before they are cut off; keep it below the orchestrator's grace period (Kubernetes: 30s)")
	completeAfter := flag.Duration("complete-after", 0, "finish a payment its client abandoned this long after its lease passed (default: the spec's complete-after, 10m)")
	completerInterval := flag.Duration("completer-interval", time.Minute, "time between the completer's runs")
	redisURL := flag.String("redis-url", "", "put a Redis replay filter in front of the key store, such as redis://127.0.0.1:6379/0: replays of completed keys are answered from Redis, everything else by PostgreSQL (default: none)")
	webhooks := flag.Bool("webhooks", true, "have the in-process fake payment provider send its payment.succeeded events to this API's POST /webhooks/psp")
	benchPeers := flag.Bool("bench-peers", false, "also serve the benchmark's hand-written idempotency designs under /peer/ and its four-statement endpoint under /realistic/ (for go run ./bench)")
	flag.Parse()
	secret := os.Getenv(authSecretEnv)
	if *token != "" {
		fmt.Println(server.Token(secret, *token))
		return
	}
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
		AuthSecret:        secret,
		Webhooks:          *webhooks,
		WebhookSecret:     os.Getenv(webhookSecretEnv),
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
