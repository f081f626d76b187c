// Command idemgen generates typed, idempotent HTTP handlers from an
// OpenAPI 3 spec annotated with x-idempotent. Run `idemgen help`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idemgen/idemgen/generator"
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
  idemgen migrations [-format F] [-dir DIR]   write only the key store's migrations
                                              (F: golang-migrate, the default, or goose)
  idemgen help [annotations | config]         explain the spec annotations or the config

Add to a Go file next to the config:
  //go:generate go run github.com/idemgen/idemgen/cmd/idemgen -config idemgen.yaml

Flags:
  -config FILE   the configuration file (default idemgen.yaml)
  -q             print nothing but errors
`

const annotationsHelp = `Annotate the operations that must be idempotent:

  x-idempotency:              # optional, at the document root: defaults
    ttl: 24h                  #   how long a stored response is replayed (default 24h)
    lease: 1m                 #   how long an attempt holds its key (default 1m)
    required: true            #   whether the Idempotency-Key header is required (default true)
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
            exclude: [/metadata/trace_id]   # JSON pointers into the body that do not count

Each annotated operation's method in the generated IdempotentServer receives an
*idem.Attempt whose Tx() is the attempt's transaction: write through it and your
writes commit together with the stored response. Requests then follow the
protocol: 400 for a missing or malformed key, the stored response replayed with
Idempotent-Replayed: true, 422 when a key is reused for a different request,
409 with Retry-After while the first attempt runs, 503 when the key store fails.

x-idempotent is refused, with the file, line and column, on GET/HEAD/OPTIONS/
TRACE and on streaming or binary bodies (text/event-stream, NDJSON,
application/octet-stream), which cannot be fingerprinted or replayed.
`

const configHelp = `idemgen.yaml (paths are relative to this file):

  spec: openapi.yaml          # the annotated OpenAPI 3 document
  output:
    dir: gen                  # where the Go code goes: oapi.gen.go, idempotency.gen.go
    package: gen              # its package name (default: the directory's name)
  server: std-http            # the HTTP server kind (std-http)
  migrations:
    dir: gen/migrations       # default: <output.dir>/migrations
    format: golang-migrate    # golang-migrate (NNNN_x.up.sql / .down.sql) or goose
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
	case "generate", "check":
	default:
		fmt.Fprintf(stderr, "idemgen: unknown command %q\n\n%s", cmd, usage)
		return 2
	}

	fs := flag.NewFlagSet("idemgen "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage+"\n"+annotationsHelp) }
	configPath := fs.String("config", "idemgen.yaml", "the configuration file")
	quiet := fs.Bool("q", false, "print nothing but errors")
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
	format := fs.String("format", generator.FormatGolangMigrate, "golang-migrate (NNNN_x.up.sql and .down.sql) or goose")
	dir := fs.String("dir", "migrations", "the directory to write them to")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	files, err := generator.MigrationFiles(generator.Migrations{Dir: *dir, Format: *format})
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 2
	}
	written, err := (&generator.Result{Files: files}).Write("")
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
