// Command idemgen generates typed, idempotent HTTP handlers from an
// OpenAPI 3 spec annotated with x-idempotent. Run `idemgen help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/idem/pgstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `idemgen turns an OpenAPI 3 spec annotated with x-idempotent into typed Go
server stubs (oapi-codegen's strict server) with the Idempotency-Key protocol
wired in, plus the PostgreSQL key store's migrations and sqlc queries.

Usage:
  idemgen [generate] [-config idemgen.yaml]   write the generated files
  idemgen check [-config idemgen.yaml]        fail if committed output is stale
  idemgen migrations [-format F] [-dir DIR] [-version N]
                                              write only the key store's migrations, numbered
                                              to fit DIR (F: golang-migrate, goose, tern, dbmate)
  idemgen sweep [-database-url URL] [-abandoned-for 1h] [-fail] [-batch 500] [-dry-run]
                                              report attempts abandoned partway, or with
                                              -fail store the attempt-abandoned problem for them
  idemgen reap [-database-url URL] [-batch 1000] [-dry-run]
                                              delete stored responses whose TTL has passed
  idemgen help [annotations | config]         explain the spec annotations or the config

generate and check warn, without failing, when an annotated operation's scope or
fingerprint differs from what the idempotency.gen.go in the output directory
records: a request in flight across the deploy would run again or get 422.

Add it to your module as a tool, and a generate line to a Go file next to the config:
  go get -tool github.com/idemgen/idemgen/cmd/idemgen
  //go:generate go tool idemgen -config idemgen.yaml

Flags:
  -config FILE   the configuration file (default idemgen.yaml)
  -q             print nothing but errors and warnings
`

const annotationsHelp = `Annotate the operations that must be idempotent:

  x-idempotency:              # optional, at the document root: defaults
    ttl: 24h                  #   how long a stored response is replayed (default 24h)
    lease: 1m                 #   how long an attempt holds its key (default 1m)
    required: true            #   whether the Idempotency-Key header is required (default true)
    scope: {header: X-Account-Id}   # what keys are scoped by (default: nothing; see below)
    max-body: 1MiB            #   bound on request bodies, which are buffered whole (default: the
                              #   handler's MaxBodyBytes, else 1MiB, 32MiB for multipart); bytes, KiB, MiB or GiB
  paths:
    /orders:
      post:
        operationId: createOrder
        x-idempotent: true    # or an object, below
        x-idempotency-ttl: 24h

    /refunds:
      post:
        operationId: createRefund
        x-idempotent:
          required: false     # a request without a key runs without idempotency
          ttl: 7d             # Go durations (90s, 15m, 24h) or days (7d)
          lease: 30s
          fingerprint:
            exclude: [/metadata/trace_id, X-Trace-Id]   # body pointers and parameters that do not count
          scope: {function: true}   # replaces the default: idem.Options.Scope computes it in Go
          max-body: 64KiB     # a larger body is a 413 before any claim

    /payments:
      post:
        operationId: createPayment
        x-idempotent:
          mode: phased        # atomic (default) or phased
          recovery-points: [payment_created, charge_created]

Each annotated operation's method in the generated IdempotentServer receives an
*idem.Attempt whose Tx() is the attempt's transaction: write through it and your
writes commit together with the stored response. Requests then follow the
protocol: 400 for a missing or malformed key, the stored response replayed with
Idempotent-Replayed: true, 422 when a key is reused for a different request,
409 with Retry-After while the first attempt runs, 503 when the key store fails.

A phased operation has one method per phase, each in a transaction of its own:
CreatePayment first, then CreatePaymentAfter<Point> for each recovery point.
Each returns CreatePaymentNext(point) or CreatePaymentRespond(response), the
last the response itself. A retry after a crash resumes at the unfinished phase.

The fingerprint that tells a retry from a different request covers the
operation, its path, query and header parameters (the Idempotency-Key aside)
and its decoded body. fingerprint.exclude leaves out JSON pointers into the
body (starting with /) and parameters by name (headers in any case); both are
checked against the spec.

scope keeps one caller's keys apart from another's: the same key under two
scopes is two keys. It takes
  {header: NAME}     the value of a header parameter the operation declares;
                     a request without it gets a 400
  {function: true}   what idem.Options.Scope(ctx, r), your Go function,
                     returns; it sees what the middlewares put in the context
                     (a principal, say). The constructor panics if it is nil.
  {header: NAME, function: true}
                     both, joined: keys are per principal per tenant
  none               nothing: every caller shares the keys, on purpose
An operation's scope replaces the document's whole. idem.Options.Scope, when
set, applies to every operation, whatever the spec says. An annotated
operation without a scope that declares a header such as X-Tenant-Id or
X-Account-Id, or that requires security, gets a warning (printed even with
-q; warnings never fail generate or check).

x-idempotent is refused, with the file, line and column, on GET/HEAD/OPTIONS/
TRACE and on streaming or binary bodies (text/event-stream, NDJSON,
application/octet-stream), which cannot be fingerprinted or replayed, and on
webhooks and callbacks, requests the API sends rather than serves.
`

const configHelp = `idemgen.yaml (paths are relative to this file):

  spec: openapi.yaml          # the annotated OpenAPI 3 document
  output:
    dir: gen                  # where the Go code goes: oapi.gen.go, idempotency.gen.go
    package: gen              # its package name (default: the directory's name)
    spec: gen/openapi.yaml    # optional: a copy of the spec documenting the protocol, for clients and docs
  server: std-http            # the HTTP server kind: std-http, chi, echo or gin
  client: true                # optional: oapi-codegen's client and IdempotentClient (one key per call, kept on retries)
  tests: true                 # optional: <package>test, whose Check runs idem/idemtest's protocol checks on every annotated operation
  migrations:
    dir: gen/migrations       # default: <output.dir>/migrations
    format: golang-migrate    # golang-migrate (NNNN_x.up.sql / .down.sql), goose, tern or dbmate; numbered after the dir's own
    version: 0                # optional: the first version for migrations new to the dir (dbmate's default: the time)
  queries:
    dir: gen/queries          # the key store's sqlc queries; default: <output.dir>/queries
  oapi-codegen:
    output-options:           # passed to oapi-codegen, e.g.
      skip-prune: true
`

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "generate"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		topic := ""
		if len(args) > 0 {
			topic = args[0]
		}
		switch topic {
		case "":
			fmt.Fprint(stdout, usage+"\n"+annotationsHelp)
		case "annotations":
			fmt.Fprint(stdout, annotationsHelp)
		case "config":
			fmt.Fprint(stdout, configHelp)
		default:
			fmt.Fprintf(stderr, "idemgen: no help on %q; try `idemgen help annotations` or `idemgen help config`\n", topic)
			return 2
		}
		return 0
	case "migrations":
		return runMigrations(args, stderr)
	case "sweep", "reap":
		return runJanitor(cmd, args, stderr)
	case "generate", "check":
	default:
		fmt.Fprintf(stderr, "idemgen: unknown command %q\n\n%s", cmd, usage)
		return 2
	}

	fs := flag.NewFlagSet("idemgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage+"\n"+annotationsHelp) }
	configPath := fs.String("config", "idemgen.yaml", "the configuration file")
	quiet := fs.Bool("q", false, "print nothing but errors and warnings")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemgen: unexpected arguments %q\n\n%s", fs.Args(), usage)
		return 2
	}

	start := time.Now()
	cfg, err := generator.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	res, err := generator.Generate(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	// Warnings are kept with -q: each points at something in the spec
	// that may be a mistake, which a quiet run must not hide. They do
	// not fail the run, so that a team can decide in its own time.
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "idemgen: %s\n", w)
	}
	dir := filepath.Dir(*configPath)
	summary := fmt.Sprintf("%s: %d operations, %d idempotent", cfg.Spec, res.Operations, res.Idempotent)
	if cmd == "check" {
		if err := res.Check(dir); err != nil {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
			return 1
		}
		if !*quiet {
			fmt.Fprintf(stderr, "idemgen: %s; %d files up to date (%s)\n", summary, len(res.Files), elapsed(start))
		}
		return 0
	}
	written, err := res.Write(dir)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	if !*quiet {
		fmt.Fprintf(stderr, "idemgen: %s; wrote %d of %d files (%s)\n", summary, len(written), len(res.Files), elapsed(start))
		for _, f := range written {
			fmt.Fprintf(stderr, "\t%s\n", f)
		}
	}
	return 0
}

func elapsed(start time.Time) string {
	return time.Since(start).Round(time.Millisecond).String()
}

// runMigrations writes the key store's migrations, for teams that keep the
// table in a migration directory of their own and generate nothing else.
func runMigrations(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemgen migrations", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", generator.FormatGolangMigrate, "golang-migrate (NNNN_x.up.sql and .down.sql), goose (NNNN_x.sql, -- +goose Up/Down), tern (NNNN_x.sql, ---- create above / drop below ----) or dbmate (YYYYMMDDHHMMSS_x.sql, -- migrate:up/down)")
	dir := fs.String("dir", "migrations", "the directory to write them to")
	version := fs.Uint64("version", 0, "the first version of migrations new to the directory (default: after the highest version there; for dbmate, the time)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	files, stale, err := generator.MigrationFiles("", generator.Migrations{Dir: *dir, Format: *format, Version: *version})
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 2
	}
	written, err := (&generator.Result{Files: files, Stale: stale}).Write("")
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "idemgen: wrote %d of %d migration files\n", len(written), len(files))
	for _, f := range written {
		fmt.Fprintf(stderr, "\t%s\n", f)
	}
	return 0
}

// runJanitor runs one of the key store's background jobs once, by hand or
// from cron, for servers that do not run a pgstore.Janitor.
func runJanitor(cmd string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("idemgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Not defaulted from the environment, so that -h cannot print a password.
	databaseURL := fs.String("database-url", "", "the PostgreSQL database of the key store (default $DATABASE_URL)")
	dryRun := fs.Bool("dry-run", false, "count what would change and change nothing")
	var (
		batch int
		sweep pgstore.SweepOptions
		reap  pgstore.ReapOptions
	)
	if cmd == "sweep" {
		fs.IntVar(&batch, "batch", 500, "the most rows one statement changes")
		fs.DurationVar(&sweep.AbandonedFor, "abandoned-for", time.Hour, "how long after its lease ended an in-flight attempt counts as abandoned")
		fs.BoolVar(&sweep.Fail, "fail", false, "store the attempt-abandoned problem (500) as the response of abandoned attempts; without it they are only reported")
	} else {
		fs.IntVar(&batch, "batch", 1000, "the most rows one statement deletes")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage of idemgen %s:\n", cmd)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "idemgen %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	case batch <= 0:
		fmt.Fprintf(stderr, "idemgen %s: -batch must be positive\n", cmd)
		return 2
	case sweep.AbandonedFor <= 0 && cmd == "sweep":
		fmt.Fprintf(stderr, "idemgen %s: -abandoned-for must be positive\n", cmd)
		return 2
	}
	if *databaseURL == "" {
		*databaseURL = os.Getenv("DATABASE_URL")
	}
	if *databaseURL == "" {
		fmt.Fprintf(stderr, "idemgen %s: no database; set DATABASE_URL or pass -database-url\n", cmd)
		return 2
	}

	// An interrupt stops the job between two batches.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, *databaseURL)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
		return 2
	}
	defer pool.Close()
	store := pgstore.New(pool, pgstore.Options{})
	log := slog.New(slog.NewTextHandler(stderr, nil))

	start := time.Now()
	var summary string
	if cmd == "sweep" {
		sweep.BatchSize, sweep.DryRun, sweep.Logger = batch, *dryRun, log
		res, err := store.Sweep(ctx, sweep)
		if err != nil {
			return databaseError(stderr, cmd, err)
		}
		switch {
		case *dryRun:
			summary = fmt.Sprintf("%s (dry run; nothing changed)", count(res.Abandoned, "abandoned attempt"))
		case sweep.Fail:
			summary = fmt.Sprintf("%s marked failed in %s (%s)", count(res.Failed, "abandoned attempt"), count(res.Batches, "batch"), elapsed(start))
		default:
			summary = fmt.Sprintf("%s, left for a retry to take over; -fail marks them failed (%s)", count(res.Abandoned, "abandoned attempt"), elapsed(start))
		}
	} else {
		reap.BatchSize, reap.DryRun, reap.Logger = batch, *dryRun, log
		res, err := store.Reap(ctx, reap)
		if err != nil {
			return databaseError(stderr, cmd, err)
		}
		if *dryRun {
			summary = fmt.Sprintf("%s would be deleted (dry run)", count(res.Deleted, "expired key"))
		} else {
			summary = fmt.Sprintf("deleted %s in %s (%s)", count(res.Deleted, "expired key"), count(res.Batches, "batch"), elapsed(start))
			if res.Emptied > 0 {
				// Kept so that their next use never repeats a derived key.
				summary = fmt.Sprintf("deleted %s and emptied %s whose attempts derived keys, in %s (%s)",
					count(res.Deleted, "expired key"), fmt.Sprint(res.Emptied)+" more", count(res.Batches, "batch"), elapsed(start))
			}
		}
	}
	fmt.Fprintf(stderr, "idemgen: %s: %s\n", cmd, summary)
	return 0
}

// databaseError reports a failed job, naming the fix for the likeliest
// first failure: a database whose key table was never created.
func databaseError(stderr io.Writer, cmd string, err error) int {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		fmt.Fprintf(stderr, "idemgen %s: the key store's table does not exist in this database (%s, SQLSTATE 42P01); "+
			"apply the key store's migrations: idemgen migrations, or pgstore.Migrate\n", cmd, pgErr.Message)
		return 1
	}
	fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
	return 1
}

// count renders n things, in the plural unless n is 1.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if thing == "batch" {
		return fmt.Sprintf("%d batches", n)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
