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
		out = append(out, migration{version, name, string(sql)})
	}
	return out, nil
}

// Migrate applies the key-store migrations (schema/*.up.sql) that the
// database lacks, each once, recorded in idemgen_schema_migrations, in one
// transaction under an advisory lock: processes that start at once all
// succeed, one after the other. A database migrated by newer code is
// refused with ErrSchemaNewer. A database from before the version table
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
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS idemgen_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("pgstore: migrate: version table: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	latest := all[len(all)-1]
	if n := len(applied); n > 0 && applied[n-1] > latest.version {
		return fmt.Errorf("%w: the database is at key-store migration %d, and this code knows migrations up to %d (%s); deploy the code that migrated it, or roll the database back with the down migrations (idemgen migrations writes them)",
			ErrSchemaNewer, applied[n-1], latest.version, latest.name)
	}
	for _, m := range all {
		if slices.Contains(applied, m.version) {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("pgstore: migrate %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
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

func appliedVersions(ctx context.Context, tx pgx.Tx) ([]int, error) {
	rows, err := tx.Query(ctx, `SELECT version FROM idemgen_schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	return versions, nil
}
