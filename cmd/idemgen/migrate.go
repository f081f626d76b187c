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
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
)

const migrateAbout = `Migrate applies, rolls back and reports the key store's migrations on a
database, as pgstore.Migrate does at a server's start, for teams that apply
them before they deploy instead:

	idemgen migrate status            what the database has, and what this release knows
	idemgen migrate up                apply what the database lacks (-to N: up to N)
	idemgen migrate down -to N        roll back every migration numbered above N

Each migration runs in a transaction of its own, recorded in the table
idemgen_schema_migrations, under an advisory lock that makes concurrent
runs wait for each other. Its statements wait at most -lock-timeout for a
lock: a migration that would queue behind a long transaction on the key
table gives up, rolls back and tries again after a pause, so requests wait
at most that long behind it, never for the whole migration.

Upgrade by applying the new release's migrations, then deploying its
binaries: the previous release serves a database migrated one release
ahead (each migration says how far back it stays compatible). Roll back
by deploying the previous release's binaries first, then, if you want
the database back too, running this release's

	idemgen migrate down -to <the previous release's newest migration>

which runs the down files and removes their rows from the version table.
docs/UPGRADING.md says which migration each release ends at.

With -river, up also applies River's migrations, which async operations
(mode: async) need, after the key store's, each in a transaction of its
own under a lock of its own, as idemriver.Migrate does at a server's
start; status lists them too. River's tables are never rolled back here
(that drops their jobs): use River's own CLI for that.

The database is -database-url, or DATABASE_URL.
`

// migrateCommand is migrate's: its first argument names the
// subcommand, and its flags may also follow that.
func migrateCommand(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) int {
	databaseURL := fs.String("database-url", "", "the key store's PostgreSQL database, as a `URL` (default $DATABASE_URL)")
	to := fs.Int("to", -1, "up: apply migrations up to and including this `number` (default: all); down: roll back those above it (required)")
	lockTimeout := fs.Duration("lock-timeout", pgstore.DefaultMigrateLockTimeout, "how long each statement waits for a lock before the migration rolls back and tries again")
	attempts := fs.Int("attempts", pgstore.DefaultMigrateAttempts, "how often a migration is tried before giving up on a busy table")
	withRiver := fs.Bool("river", false, "up and status: River's migrations too, for async operations")
	return func(args []string, stdout, stderr io.Writer) int {
		if len(args) == 0 {
			return usageError(stderr, "migrate", "missing subcommand: status, up or down")
		}
		sub := args[0]
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, lookup("migrate").help())
				return 0
			}
			return usageError(stderr, "migrate", err.Error())
		}
		switch {
		case sub != "status" && sub != "up" && sub != "down":
			return usageError(stderr, "migrate", fmt.Sprintf("unknown subcommand %q: want status, up or down", sub))
		case fs.NArg() > 0:
			return usageError(stderr, "migrate", fmt.Sprintf("unexpected arguments %q", fs.Args()))
		case sub == "down" && *to < 0:
			return usageError(stderr, "migrate", "down needs -to: the number of the last migration to keep (0 for none)")
		case sub == "status" && *to >= 0:
			return usageError(stderr, "migrate", "-to is a flag of up and down, not of status")
		case sub == "down" && *withRiver:
			return usageError(stderr, "migrate", "-river is a flag of up and status: River's tables are not rolled back here, as that drops their jobs; use River's own CLI")
		case *lockTimeout <= 0 || *attempts < 1:
			return usageError(stderr, "migrate", "-lock-timeout must be above 0 and -attempts at least 1")
		}
		url := *databaseURL
		if url == "" {
			url = os.Getenv("DATABASE_URL")
		}
		if url == "" {
			fmt.Fprintln(stderr, "idemgen migrate: no database; set DATABASE_URL or pass -database-url")
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrate: %v\n", err)
			return 2
		}
		defer pool.Close()
		m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{
			LockTimeout: *lockTimeout,
			Attempts:    *attempts,
			Logger:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrate: %v\n", err)
			return 1
		}
		if sub == "status" {
			code := migrateStatus(ctx, m, stdout, stderr)
			if code == 0 && *withRiver {
				code = riverStatus(ctx, pool, stdout, stderr)
			}
			return code
		}
		start := time.Now()
		var done []pgstore.MigrationResult
		if sub == "up" {
			target := max(*to, 0)
			done, err = m.Up(ctx, target)
		} else {
			done, err = m.Down(ctx, *to)
		}
		verb := map[string]string{"up": "applied", "down": "rolled back"}[sub]
		for _, r := range done {
			retries := ""
			if r.Retries > 0 {
				retries = fmt.Sprintf(", after %s on a busy table", count(r.Retries, "retry"))
			}
			fmt.Fprintf(stdout, "%s %s (%s%s)\n", verb, r.Name, r.Duration.Round(time.Millisecond), retries)
		}
		if err != nil {
			fmt.Fprintf(stderr, "idemgen migrate %s: %v\n", sub, err)
			return 1
		}
		n := len(done)
		if *withRiver {
			river, err := idemriver.MigrateUp(ctx, pool)
			for _, r := range river {
				fmt.Fprintf(stdout, "applied River's %03d_%s (%s)\n", r.Version, r.Name, r.Duration.Round(time.Millisecond))
			}
			if err != nil {
				fmt.Fprintf(stderr, "idemgen migrate %s: %v\n", sub, err)
				return 1
			}
			n += len(river)
		}
		fmt.Fprintf(stderr, "idemgen migrate %s: %s %s (%s)\n", sub, verb, count(n, "migration"), elapsed(start))
		return 0
	}
}

func migrateStatus(ctx context.Context, m *pgstore.Migrator, stdout, stderr io.Writer) int {
	st, err := m.Status(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen migrate status: %v\n", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MIGRATION\tAPPLIED\tSERVED BY")
	pending, newer := 0, 0
	for _, s := range st {
		applied := "pending"
		if !s.Applied.IsZero() {
			applied = s.Applied.UTC().Format(time.RFC3339)
		} else {
			pending++
		}
		servedBy := fmt.Sprintf("code that knows %04d", s.Version)
		if s.CompatibleFrom > 0 {
			servedBy = fmt.Sprintf("code that knows %04d or later", s.CompatibleFrom)
		}
		if !s.Known {
			newer++
			applied += " (newer than this release)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, applied, servedBy)
	}
	w.Flush()
	switch {
	case newer > 0:
		fmt.Fprintf(stderr, "idemgen migrate status: the database has %s newer than this release (%s, which knows up to %04d)\n", count(newer, "migration"), idem.Version(), m.Latest())
	case pending > 0:
		fmt.Fprintf(stderr, "idemgen migrate status: %s pending; apply with idemgen migrate up before this release's binaries serve\n", count(pending, "migration"))
	default:
		fmt.Fprintf(stderr, "idemgen migrate status: up to date with %s (migration %04d)\n", idem.Version(), m.Latest())
	}
	return 0
}

// riverStatus lists River's migrations, as status -river shows them.
func riverStatus(ctx context.Context, pool *pgxpool.Pool, stdout, stderr io.Writer) int {
	all, err := idemriver.MigrationStatus(ctx, pool)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen migrate status: %v\n", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nRIVER MIGRATION\tAPPLIED")
	pending := 0
	for _, m := range all {
		applied := "yes"
		if !m.Applied {
			applied = "pending"
			pending++
		}
		fmt.Fprintf(w, "%03d_%s\t%s\n", m.Version, m.Name, applied)
	}
	w.Flush()
	if pending > 0 {
		fmt.Fprintf(stderr, "idemgen migrate status: %s of River's pending; apply with idemgen migrate up -river\n", count(pending, "migration"))
	}
	return 0
}
