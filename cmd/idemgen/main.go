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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/generator"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// A command is one of idemgen's subcommands.
type command struct {
	name    string
	args    string // its arguments after the flags, for its usage line
	summary string // one line, for the list of commands
	about   string // what its help says above the flags
	// setup defines the command's flags on fs and returns what runs it
	// once they are parsed, with the arguments that follow them.
	setup func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int
}

// commands are idemgen's subcommands, in the order help lists them. Set
// in init: help's own refers to them.
var commands []*command

func init() {
	commands = []*command{
		{name: "generate", summary: "write the generated files; the command run when none is named",
			about: generateAbout, setup: generateCommand("generate")},
		{name: "check", summary: "fail, naming the files, if the committed generated files are stale",
			about: checkAbout, setup: generateCommand("check")},
		{name: "migrations", summary: "write only the key store's migrations (-river: and River's), numbered to fit a directory",
			about: migrationsAbout, setup: migrationsCommand},
		{name: "migrate", args: "status|up|down", summary: "apply, roll back or report the key store's migrations on a database",
			about: migrateAbout, setup: migrateCommand},
		{name: "sweep", summary: "report attempts abandoned partway, or with -fail end them",
			about: sweepAbout, setup: janitorCommand("sweep")},
		{name: "reap", summary: "delete stored responses whose TTL has passed",
			about: reapAbout, setup: janitorCommand("reap")},
		{name: "keys", args: "list|show|forget", summary: "list, show or forget the keys in the key store",
			about: keysAbout, setup: keysCommand},
		{name: "version", summary: "print idemgen's version and the Go version it was built with",
			about: "Version prints the version of idemgen's module and the Go version it was\nbuilt with. A build at a module version (go install ...@v0.2.0, or go tool\nin a module that requires one) prints that version; a build from a\ncheckout prints the release it leads to as a development build, with the\ncommit when the go command recorded it: v0.2.0-devel+abc123def456, and\n.dirty after it for uncommitted changes.\n", setup: versionCommand},
		{name: "help", args: "[command | annotations | config]", summary: "print this help, a command's, or a guide",
			about: "Help prints the list of commands, a command's help (the same as\n'idemgen <command> -h'), or one of the guides:\n\n" + guideList, setup: helpCommand},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flags returns the command's flag set, with what runs the command once
// it is parsed.
func (c *command) flags() (*flag.FlagSet, func(args []string, stdout, stderr io.Writer) int) {
	fs := flag.NewFlagSet("idemgen "+c.name, flag.ContinueOnError)
	// Parse reports nothing itself: help goes to stdout, errors to
	// stderr in the words run chooses.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs, c.setup(fs)
}

// usageLine is the command's synopsis, made from its flag set, so that
// it lists exactly the flags the command accepts.
func (c *command) usageLine(fs *flag.FlagSet) string {
	line := "usage: idemgen " + c.name
	fs.VisitAll(func(f *flag.Flag) {
		if name, _ := flag.UnquoteUsage(f); name != "" {
			line += fmt.Sprintf(" [-%s %s]", f.Name, name)
		} else {
			line += fmt.Sprintf(" [-%s]", f.Name)
		}
	})
	if c.args != "" {
		line += " " + c.args
	}
	return line
}

// help is what `idemgen <command> -h` prints.
func (c *command) help() string {
	fs, _ := c.flags()
	var b strings.Builder
	b.WriteString(c.usageLine(fs) + "\n\n" + c.about)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		b.WriteString("\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
	}
	return b.String()
}

const intro = `idemgen turns an OpenAPI 3 spec annotated with x-idempotent into typed Go
server stubs (oapi-codegen's strict server) with the Idempotency-Key protocol
wired in, plus the PostgreSQL key store's migrations and sqlc queries.
`

const guideList = `	idemgen help annotations   the spec's annotations: x-idempotent and x-idempotency
	idemgen help config        the configuration file, idemgen.yaml, and go generate
`

// shortHelp is what `idemgen help` and `idemgen -h` print.
func shortHelp() string {
	var b strings.Builder
	b.WriteString(intro + "\nUsage:\n\n\tidemgen <command> [flags]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-11s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'idemgen <command> -h' for a command's flags. The guides:\n\n" + guideList)
	return b.String()
}

const generateAbout = `Generate writes the files idemgen.yaml asks for: the Go code, oapi-codegen's
and the idempotency layer over it, the key store's migrations and sqlc
queries, and, if asked for, a copy of the spec documenting the protocol and
test helpers. It writes only the files that changed, and lists them.
'idemgen -config idemgen.yaml' is 'idemgen generate -config idemgen.yaml'.

It warns, without failing, when an annotated operation's scope or
fingerprint differs from what the idempotency.gen.go in the output directory
records: a request in flight across the deploy would run again or get 422.

Run it with go generate, from a Go file in the output package, after adding
idemgen to the module as a tool (` + "`idemgen help config`" + ` says more):

	go get -tool github.com/idemgen/idemgen/cmd/idemgen
	//go:generate go tool idemgen -config ../idemgen.yaml
`

const checkAbout = `Check generates what generate would, writes nothing, and fails, naming the
files, when a generated file is missing or differs from what is committed,
or when idemgen wrote a file that it no longer generates. Run it in CI.
It warns as generate does.
`

const migrationsAbout = `Migrations writes only the key store's migrations, for a service that keeps
the key table in a migration directory of its own and generates nothing
else. They are numbered after the highest version in the directory, in the
width of the migrations there (timestamps included), and never collide; a
file idemgen wrote before keeps its version, and one of a format used before
is removed. dbmate's are stamped with the time they are first written.

With -river, River's migrations follow the key store's, one file per River
version (NNNN_river_001_create_river_migration), for a service with async
operations; generate writes them by itself when the spec has one. Each
applies River's version only where River's river_migration table does not
list it yet, and lists it there, as idemriver.Migrate and idemgen migrate up
-river do, so a database migrated either way, or both, has each version
once. A directory that has River's files keeps them, with or without -river.
`

const sweepAbout = `Sweep finds the attempts abandoned partway: in flight, their lease ended
longer ago than -abandoned-for. It reports them, leaving them for a retry
to take over, or with -fail stores the attempt-abandoned problem (500) as
their response. Run it by hand or from cron, for servers that do not run a
pgstore.Janitor.
`

const reapAbout = `Reap deletes the stored responses whose TTL has passed, in batches. The row
of a key whose attempts derived keys for a provider is emptied instead,
and deleted once it has been emptied for -emptied-for: until then the
key's next use derives keys never sent before. Run it by hand or from
cron, for servers that do not run a pgstore.Janitor.
`

const annotationsHelp = `Annotate the operations that must be idempotent:

  x-idempotency:              # optional, at the document root: defaults
    ttl: 24h                  #   how long a stored response is replayed (default 24h)
    lease: 1m                 #   how long an attempt holds its key (default 1m)
    required: true            #   whether the Idempotency-Key header is required (default true)
    scope: {header: X-Account-Id}   # what keys are scoped by (default: nothing; see below)
    max-body: 1MiB            #   bound on request bodies, which are buffered whole (default: the
                              #   handler's MaxBodyBytes, else 1MiB, 32MiB for multipart); bytes, KiB, MiB or GiB
    validate: true            #   check requests against the spec before any claim (default true)
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
          validate: false     # leave the request's schema to the handler

    /payments:
      post:
        operationId: createPayment
        x-idempotent:
          mode: phased        # atomic (default) or phased
          recovery-points: [payment_created, charge_created]
          abandoned: complete # or fail: an attempt abandoned partway is ended (see below)
          complete-after: 30m # with abandoned (default 1h)

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

abandoned, on a phased operation, has a completer inside the service drive an
attempt to the end once its lease has passed and its client has not come back
for complete-after. complete resumes it at its recovery point, with the request
as the handler first received it, and stores the final response, which the
client's retry replays; it is refused for a multipart request body, which
cannot be stored. fail stores the terminal attempt-abandoned problem, as
idemgen sweep -fail does. Without abandoned, such an attempt is left for a
retry to take over, and idemgen sweep reports it.

validate, on by default, checks each request against the parameters and body
the spec declares (lengths, patterns, enums, ranges, required members, formats)
before its key is claimed, with kin-openapi's validator: a request that breaks
them is a 400 invalid-request, in the API's error shape, naming the parameter or
the body's JSON pointer, and its key stays unused. A form body is checked where
kin-openapi's form decoder takes its shape (members that are scalars, arrays of
scalars, or objects of scalars encoded as deepObject); others are left to the
binder. validate: false leaves the schema to the handler.

The fingerprint that tells a retry from a different request covers the
operation, its path, query and header parameters (the Idempotency-Key aside)
and its decoded body. fingerprint.exclude leaves out JSON pointers into the
body (starting with /) and parameters by name (headers in any case); both are
checked against the spec.

scope keeps one caller's keys apart from another's: the same key under two
scopes is two keys. It takes
  {header: NAME}     the value of a header parameter the operation declares;
                     a request without it gets a 400. It is only as
                     trustworthy as the header: check it against the
                     caller's credentials in a strict middleware, or
                     scope by the principal (function: true)
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
  migrations:                 # the key store's, then River's with async operations (idemgen help migrations)
    dir: gen/migrations       # default: <output.dir>/migrations
    format: golang-migrate    # golang-migrate (NNNN_x.up.sql / .down.sql), goose, tern or dbmate; numbered after the dir's own, in their width
    version: 0                # optional: the first version for migrations new to the dir (dbmate's default: the time)
    lock-timeout: 2s          # the lock_timeout each migration sets: a busy key table fails it, to run again, instead of stalling requests; 0: the session's
  queries:
    dir: gen/queries          # the key store's sqlc queries; default: <output.dir>/queries
  oapi-codegen:
    output-options:           # passed to oapi-codegen, e.g.
      skip-prune: true
  errors:                     # optional: the layer's answers in the API's own error schema, not problem+json
    schema: "#/components/schemas/Error"   # the spec's error schema; the augmented spec declares the answers with it
    envelope: error           # optional: the member holding the error object, as in {"error": {...}}
    members: {code: code, detail: message}  # which member carries type (URI), code, title, detail, status, retry
    fixed: {type: idempotency_error}        # optional: members with the same value in every answer
    retry-header: Stripe-Should-Retry       # optional: "true" or "false", whether a retry with the same key is right

Add idemgen to the module as a tool, so that every developer and CI run the
same version, and the generate line to a Go file in the output package, such
as gen/generate.go; -config is relative to that file's directory:

  go get -tool github.com/idemgen/idemgen/cmd/idemgen
  //go:generate go tool idemgen -config ../idemgen.yaml

Then go generate ./... writes the files, and go tool idemgen check -config
idemgen.yaml, run in CI from the module's root, fails when they are stale.
`

func run(args []string, stdout, stderr io.Writer) int {
	name := "generate"
	if len(args) > 0 {
		switch a := args[0]; {
		case isHelpFlag(a):
			fmt.Fprint(stdout, shortHelp())
			return 0
		case a != "" && a[0] != '-':
			name, args = a, args[1:]
		}
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "idemgen: unknown command %q\nRun 'idemgen help' for usage.\n", name)
		return 2
	}
	fs, cmd := c.flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, c.help())
			return 0
		}
		// The flag package says "for flag -x"; a flag is all there is.
		return usageError(stderr, c.name, strings.Replace(err.Error(), " for flag -", " for -", 1))
	}
	return cmd(fs.Args(), stdout, stderr)
}

func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

// usageError reports a mistake in how a command was run, with where to
// look for how to run it, and returns the exit code for it.
func usageError(stderr io.Writer, cmd, msg string) int {
	fmt.Fprintf(stderr, "idemgen %s: %s\nRun 'idemgen %s -h' for usage.\n", cmd, msg, cmd)
	return 2
}

func helpCommand(*flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		topic := ""
		if len(args) > 0 {
			topic = args[0]
		}
		if len(args) > 1 {
			return usageError(stderr, "help", fmt.Sprintf("unexpected arguments %q", args[1:]))
		}
		switch c := lookup(topic); {
		case topic == "" || isHelpFlag(topic):
			fmt.Fprint(stdout, shortHelp())
		case topic == "annotations":
			fmt.Fprint(stdout, annotationsHelp)
		case topic == "config":
			fmt.Fprint(stdout, configHelp)
		case c != nil:
			fmt.Fprint(stdout, c.help())
		default:
			fmt.Fprintf(stderr, "idemgen help: no help on %q\nRun 'idemgen help' for the commands and guides.\n", topic)
			return 2
		}
		return 0
	}
}

func versionCommand(*flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		if len(args) > 0 {
			return usageError(stderr, "version", fmt.Sprintf("unexpected arguments %q", args))
		}
		version, goVersion := idem.Version(), runtime.Version()
		if info, ok := debug.ReadBuildInfo(); ok && info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		fmt.Fprintf(stdout, "idemgen %s, built with %s\n", version, goVersion)
		return 0
	}
}

// generateCommand is generate's, or check's.
func generateCommand(cmd string) func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	return func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
		configPath := fs.String("config", "idemgen.yaml", "read the configuration from `file`")
		quiet := fs.Bool("q", false, "print nothing but errors and warnings")
		return func(args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 {
				return usageError(stderr, cmd, fmt.Sprintf("unexpected arguments %q", args))
			}
			return generate(cmd, *configPath, *quiet, stderr)
		}
	}
}

func generate(cmd, configPath string, quiet bool, stderr io.Writer) int {
	start := time.Now()
	cfg, err := generator.LoadConfig(configPath)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	req, err := generator.Load(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	res, err := generator.Generate(req)
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
	dir := filepath.Dir(configPath)
	summary := fmt.Sprintf("%s: %s, %d idempotent", cfg.Spec, count(res.Operations, "operation"), res.Idempotent)
	if cmd == "check" {
		if err := res.Check(dir); err != nil {
			fmt.Fprintf(stderr, "idemgen: %v\n", err)
			return 1
		}
		if !quiet {
			fmt.Fprintf(stderr, "idemgen: %s; %d files up to date (%s)\n", summary, len(res.Files), elapsed(start))
		}
		return 0
	}
	written, err := res.Write(dir)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen: %v\n", err)
		return 1
	}
	if !quiet {
		fmt.Fprintf(stderr, "idemgen: %s; %s (%s)\n", summary, writeSummary(written, len(res.Files), "files"), elapsed(start))
		for _, f := range written {
			fmt.Fprintf(stderr, "\t%s\n", f)
		}
	}
	return 0
}

// writeSummary says how many of total files Write wrote, and how many
// stale ones it removed: written lists both, the removed marked so.
func writeSummary(written []string, total int, files string) string {
	removed := 0
	for _, w := range written {
		if strings.HasSuffix(w, " (removed)") {
			removed++
		}
	}
	s := fmt.Sprintf("wrote %d of %d %s", len(written)-removed, total, files)
	if removed > 0 {
		s += fmt.Sprintf(", removed %d no longer generated", removed)
	}
	return s
}

func elapsed(start time.Time) string {
	return time.Since(start).Round(time.Millisecond).String()
}

// formatFlag is -format: one of the migration formats, checked as the
// flag is parsed.
type formatFlag string

func (f *formatFlag) String() string { return string(*f) }

func (f *formatFlag) Set(s string) error {
	for _, known := range generator.MigrationFormats() {
		if s == known {
			*f = formatFlag(s)
			return nil
		}
	}
	return fmt.Errorf("expected one of %s", strings.Join(generator.MigrationFormats(), ", "))
}

// migrationsCommand writes the key store's migrations, for teams that
// keep the table in a migration directory of their own and generate
// nothing else.
func migrationsCommand(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	format := formatFlag(generator.FormatGolangMigrate)
	fs.Var(&format, "format", "the migration tool's `format`: golang-migrate (NNNN_x.up.sql and .down.sql), goose (NNNN_x.sql, -- +goose Up/Down), "+
		"tern (NNNN_x.sql, ---- create above / drop below ----) or dbmate (YYYYMMDDHHMMSS_x.sql, -- migrate:up/down)")
	dir := fs.String("dir", "migrations", "write the migrations to `dir`")
	version := fs.Uint64("version", 0, "number the migrations new to the directory from `n` (default: after the highest version there; for dbmate, the time)")
	quiet := fs.Bool("q", false, "print nothing but errors")
	river := fs.Bool("river", false, "also write River's migrations, after the key store's, for async operations")
	lockTimeout := fs.String("lock-timeout", generator.DefaultMigrationLockTimeout.String(), "the lock_timeout each migration sets for its transaction, a `duration`: a busy key table fails it, to be run again, rather than stall requests; 0 leaves the session's own")
	return func(args []string, stdout, stderr io.Writer) int {
		if len(args) > 0 {
			return usageError(stderr, "migrations", fmt.Sprintf("unexpected arguments %q", args))
		}
		if d, err := time.ParseDuration(*lockTimeout); err != nil || d < 0 {
			return usageError(stderr, "migrations", fmt.Sprintf("invalid value %q for -lock-timeout: want a duration such as 2s, or 0", *lockTimeout))
		}
		existing, err := generator.ReadMigrationFolder(*dir)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrations: %v\n", err)
			return 1
		}
		files, stale, err := generator.MigrationFiles(existing, generator.Migrations{Dir: *dir, Format: string(format), Version: *version, LockTimeout: *lockTimeout, River: *river})
		if ve := (*generator.VersionError)(nil); errors.As(err, &ve) {
			return usageError(stderr, "migrations", fmt.Sprintf("invalid value %d for -version: %s", ve.Version, ve.Reason()))
		}
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrations: %v\n", err)
			return 1
		}
		written, err := (&generator.Result{Files: files, Stale: stale}).Write("")
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrations: %v\n", err)
			return 1
		}
		if !*quiet {
			fmt.Fprintf(stderr, "idemgen: %s\n", writeSummary(written, len(files), "migration files"))
			for _, f := range written {
				fmt.Fprintf(stderr, "\t%s\n", f)
			}
		}
		return 0
	}
}

// janitorCommand runs one of the key store's background jobs once, by
// hand or from cron, for servers that do not run a pgstore.Janitor.
func janitorCommand(cmd string) func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	return func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
		// Not defaulted from the environment, so that -h cannot print a password.
		databaseURL := fs.String("database-url", "", "the key store's PostgreSQL database, as a `URL` (default $DATABASE_URL)")
		dryRun := fs.Bool("dry-run", false, "count what would change and change nothing")
		var o janitorOptions
		fs.DurationVar(&o.timeout, "statement-timeout", 30*time.Second, "bound on each statement, such as one waiting on a lock; 0 or less: the server's own statement_timeout")
		if cmd == "sweep" {
			fs.IntVar(&o.batch, "batch", 500, "the most rows one statement changes")
			fs.DurationVar(&o.sweep.AbandonedFor, "abandoned-for", time.Hour, "how long after its lease ended an in-flight attempt counts as abandoned")
			fs.BoolVar(&o.sweep.Fail, "fail", false, "store the attempt-abandoned problem (500) as the response of abandoned attempts; without it they are only reported")
			fs.StringVar(&o.config, "config", "", "with -fail, store the problem in the error shape of the errors section of this idemgen.yaml `file` (default: problem+json)")
		} else {
			fs.IntVar(&o.batch, "batch", 1000, "the most rows one statement deletes")
			fs.DurationVar(&o.reap.EmptiedFor, "emptied-for", pgstore.DefaultEmptiedFor,
				"how long an emptied row is kept after its TTL, longer than any provider remembers a derived key; negative keeps them for ever")
		}
		return func(args []string, stdout, stderr io.Writer) int {
			o.databaseURL, o.dryRun = *databaseURL, *dryRun
			return runJanitor(cmd, args, o, stderr)
		}
	}
}

// statementTimeout is the -statement-timeout flag as the options take it:
// there zero means the default and negative none.
func statementTimeout(flag time.Duration) time.Duration {
	if flag <= 0 {
		return -1
	}
	return flag
}

type janitorOptions struct {
	config      string // idemgen.yaml, for the errors section
	databaseURL string
	dryRun      bool
	batch       int
	timeout     time.Duration // per statement; 0 or less: the server's
	sweep       pgstore.SweepOptions
	reap        pgstore.ReapOptions
}

func runJanitor(cmd string, args []string, o janitorOptions, stderr io.Writer) int {
	switch {
	case len(args) > 0:
		return usageError(stderr, cmd, fmt.Sprintf("unexpected arguments %q", args))
	case o.batch <= 0:
		return usageError(stderr, cmd, "-batch must be positive")
	case o.sweep.AbandonedFor <= 0 && cmd == "sweep":
		return usageError(stderr, cmd, "-abandoned-for must be positive")
	}
	if o.config != "" {
		cfg, err := generator.LoadConfig(o.config)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen %s: %v\n", cmd, err)
			return 2
		}
		if cfg.Errors != nil {
			o.sweep.Problems = cfg.Errors.Shape()
		}
	}
	if o.databaseURL == "" {
		o.databaseURL = os.Getenv("DATABASE_URL")
	}
	if o.databaseURL == "" {
		fmt.Fprintf(stderr, "idemgen %s: no database; set DATABASE_URL or pass -database-url\n", cmd)
		return 2
	}

	// An interrupt stops the job between two batches.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, o.databaseURL)
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
		sweep := o.sweep
		sweep.BatchSize, sweep.DryRun, sweep.Logger, sweep.StatementTimeout = o.batch, o.dryRun, log, statementTimeout(o.timeout)
		res, err := store.Sweep(ctx, sweep)
		if err != nil {
			return databaseError(stderr, cmd, err)
		}
		switch {
		case o.dryRun:
			summary = fmt.Sprintf("%s (dry run; nothing changed)", count(res.Abandoned, "abandoned attempt"))
		case sweep.Fail:
			summary = fmt.Sprintf("%s marked failed in %s (%s)", count(res.Failed, "abandoned attempt"), count(res.Batches, "batch"), elapsed(start))
		default:
			summary = fmt.Sprintf("%s, left for a retry to take over; -fail marks them failed (%s)", count(res.Abandoned, "abandoned attempt"), elapsed(start))
		}
	} else {
		reap := o.reap
		reap.BatchSize, reap.DryRun, reap.Logger, reap.StatementTimeout = o.batch, o.dryRun, log, statementTimeout(o.timeout)
		if reap.EmptiedFor == 0 {
			reap.EmptiedFor = time.Nanosecond // the flag's 0 is no wait; the option's, the default
		}
		res, err := store.Reap(ctx, reap)
		if err != nil {
			return databaseError(stderr, cmd, err)
		}
		if o.dryRun {
			summary = fmt.Sprintf("%s would be deleted (dry run)", count(res.Deleted, "expired key"))
		} else {
			summary = fmt.Sprintf("deleted %s in %s (%s)", count(res.Deleted, "expired key"), count(res.Batches, "batch"), elapsed(start))
			if res.Emptied > 0 {
				// Kept so that their next use never repeats a derived key.
				summary = fmt.Sprintf("deleted %s and emptied %s whose attempts derived keys, in %s (%s)",
					count(res.Deleted, "expired key"), fmt.Sprint(res.Emptied)+" more", count(res.Batches, "batch"), elapsed(start))
			}
		}
		if res.DeletedEmptied > 0 {
			verb := "deleted"
			if o.dryRun {
				verb = "would be deleted"
			}
			summary += fmt.Sprintf("; %s emptied for %s or more %s", count(res.DeletedEmptied, "row"), o.reap.EmptiedFor, verb)
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
