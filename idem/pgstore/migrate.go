package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5"
)

// migrateLock serialises Migrate across processes starting at once.
const migrateLock = 0x6964656d67656e // "idemgen"

// ErrSchemaNewer reports a database whose key store was migrated by newer
// code than this: running on it could misread rows the newer code wrote.
var ErrSchemaNewer = errors.New("pgstore: the key store's schema is newer than this code")

// migration is one numbered up file of package schema.
type migration struct {
	version int
	name    string // 0002_phased_attempts
	sql     string
	// compatibleFrom is the oldest migration whose code may still serve
	// a database with this one applied (the file's "-- compatible-from:"
	// line); 0 when the file declares none, and only code that knows
	// this migration may serve.
	compatibleFrom int
}

// compatibleFrom reads a migration's "-- compatible-from: NNNN" line.
func compatibleFrom(sql string) (int, error) {
	for line := range strings.Lines(sql) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "-- compatible-from:")
		if !ok {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil {
			return 0, fmt.Errorf("its compatible-from line %q does not name a migration number", strings.TrimSpace(line))
		}
		return v, nil
	}
	return 0, nil
}

// migrations lists the key store's migrations in order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []migration
	for _, file := range names {
		name := strings.TrimSuffix(file, ".up.sql")
		num, _, _ := strings.Cut(name, "_")
		version, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s is not numbered", file)
		}
		sql, err := fs.ReadFile(schema.FS, file)
		if err != nil {
			return nil, err
		}
		from, err := compatibleFrom(string(sql))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", file, err)
		}
		out = append(out, migration{version, name, string(sql), from})
	}
	return out, nil
}

// Migrate applies the key-store migrations (schema/*.up.sql) that the
// database lacks, each once, recorded in idemgen_schema_migrations, in one
// transaction under an advisory lock: processes that start at once all
// succeed, one after the other. A database migrated by newer code is
// served as it is when every newer migration declares this code's
// schema compatible (a rolling upgrade, or a rollback of the binaries
// before the migrations), and refused with ErrSchemaNewer otherwise. A database from before the version table
// is brought under it, as the migrations are written to be re-run.
//
// then are the application's own SQL scripts, run after the key store's
// in the same transaction and under the same lock, on every call (they
// must be re-runnable, as CREATE ... IF NOT EXISTS is), so that an
// application's schema is as safe to apply at start. Teams with a
// migration tool use the files idemgen generates instead.
func Migrate(ctx context.Context, db DB, then ...string) error {
	all, err := migrations()
	if err != nil {
		return fmt.Errorf("pgstore: list migrations: %w", err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	// compatible_from (see migration.compatibleFrom) came after the
	// table: NULL on the rows written before it.
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS idemgen_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	);
	ALTER TABLE idemgen_schema_migrations ADD COLUMN IF NOT EXISTS compatible_from integer`); err != nil {
		return fmt.Errorf("pgstore: migrate: version table: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	latest := all[len(all)-1]
	if err := servable(applied, latest); err != nil {
		return err
	}
	for _, m := range all {
		if slices.ContainsFunc(applied, func(a appliedMigration) bool { return a.version == m.version }) {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("pgstore: migrate %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name, compatible_from) VALUES ($1, $2, nullif($3, 0))`, m.version, m.name, m.compatibleFrom); err != nil {
			return fmt.Errorf("pgstore: migrate %s: record it: %w", m.name, err)
		}
	}
	for i, sql := range then {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgstore: migrate: the application's script %d: %w", i+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return nil
}

// appliedMigration is a row of idemgen_schema_migrations.
type appliedMigration struct {
	version        int
	name           string
	compatibleFrom int // 0: declared none
}

// servable refuses a database migrated past latest, unless every
// migration past it declares code that knows latest compatible.
func servable(applied []appliedMigration, latest migration) error {
	for _, a := range applied {
		if a.version <= latest.version || (a.compatibleFrom > 0 && a.compatibleFrom <= latest.version) {
			continue
		}
		return fmt.Errorf("%w: the database is at key-store migration %s, which code that knows migrations only up to %s (%s) may not serve; deploy the release that migrated it, or roll the database back to %d with that release's `idemgen migrate down -to %d`, then start this one",
			ErrSchemaNewer, a.name, fmt.Sprint(latest.version), latest.name, latest.version, latest.version)
	}
	return nil
}

func appliedVersions(ctx context.Context, tx pgx.Tx) ([]appliedMigration, error) {
	rows, err := tx.Query(ctx, `SELECT version, name, coalesce(compatible_from, 0) FROM idemgen_schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appliedMigration, error) {
		var a appliedMigration
		err := row.Scan(&a.version, &a.name, &a.compatibleFrom)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	return versions, nil
}
