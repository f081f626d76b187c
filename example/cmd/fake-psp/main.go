// Command fake-psp serves the example's fake payment provider, which
// makes each charge once per Idempotency-Key, declines amounts of 4000
// cents, and reports its counts at GET /v1/stats.
//
//	go run ./example/cmd/fake-psp [-addr 127.0.0.1:9090] [-webhook-url http://127.0.0.1:8080/webhooks/psp]
//
// With -webhook-url it sends a payment.succeeded event there for each
// charge, signed the Standard Webhooks way with PSP_WEBHOOK_SECRET (or a
// random secret), and delivers it again, with backoff, until it gets a
// 2xx; GET /v1/events lists them and POST /v1/events/{id}/redeliver
// delivers one again.
//
// Once it listens it logs `msg="fake-psp: listening" url=http://host:port`,
// so that scripts given -addr 127.0.0.1:0 can find the port. Give that URL
// to the example server with -psp-url, so that the provider outlives a
// crash of the server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/example/psp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "listen address (port 0 picks a free port)")
	webhookURL := flag.String("webhook-url", "", "send a payment.succeeded event for each charge to this `URL`, such as http://127.0.0.1:8080/webhooks/psp (default: none)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *addr, *webhookURL); err != nil {
		log.Error("fake-psp: serve", "error", err)
		os.Exit(1)
	}
}

// run serves the fake on addr until ctx is done, then lets the requests
// in flight finish.
func run(ctx context.Context, log *slog.Logger, addr, webhookURL string) error {
	fake := psp.NewFake()
	if webhookURL != "" {
		var err error
		if fake, err = psp.NewFakeSending(psp.WebhookOptions{URL: webhookURL, Secret: os.Getenv("PSP_WEBHOOK_SECRET")}); err != nil {
			return err
		}
		defer fake.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	// Serve returns as soon as Shutdown begins; done tells when Shutdown
	// has finished draining.
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- srv.Shutdown(shutdown)
	}()
	log.Info("fake-psp: listening", "url", "http://"+ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if err := <-done; err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	s := fake.Stats()
	log.Info("fake-psp: stopped", "requests", s.Requests, "charges", s.Charges, "declines", s.Declines)
	return nil
}
