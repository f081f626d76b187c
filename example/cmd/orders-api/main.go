// Command orders-api serves the example orders API, whose createOrder is
// idempotent, on PostgreSQL.
//
//	go run ./example/cmd/orders-api [-addr 127.0.0.1:8080] [-work-delay 2s]
//
// DATABASE_URL names the database; without it the API uses the local
// PostgreSQL on 127.0.0.1:5432, or starts a throwaway one.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemgen/idemgen/example/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	workDelay := flag.Duration("work-delay", 0, "make createOrder wait this long inside its attempt, holding its key (shows the 409 case)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, server.Config{
		Addr:        *addr,
		DatabaseURL: os.Getenv("DATABASE_URL"),
		WorkDelay:   *workDelay,
		Logger:      log,
	})
	if err != nil {
		log.Error("orders-api: start", "error", err)
		os.Exit(1)
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Wait(); err != nil {
		log.Error("orders-api: serve", "error", err)
		os.Exit(1)
	}
	log.Info("orders-api: stopped")
}
