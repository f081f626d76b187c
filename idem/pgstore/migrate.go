package pgstore

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/schema"
)

// migrateLock serialises Migrate across processes starting at once.
const migrateLock = 0x6964656d67656e // "idemgen"

// Migrate applies the key-store migrations (schema/*.up.sql) in one
// transaction. They are written to be re-run, so calling Migrate at every
// start is safe; teams with a migration tool use the files idemgen
// generates instead.
func Migrate(ctx context.Context, db DB) error {
	names, err := fs.Glob(schema.FS, "*.up.sql")
	if err != nil {
		return fmt.Errorf("pgstore: list migrations: %w", err)
	}
	slices.Sort(names)
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	for _, name := range names {
		sql, err := fs.ReadFile(schema.FS, name)
		if err != nil {
			return fmt.Errorf("pgstore: migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("pgstore: migrate %s: %w", strings.TrimSuffix(name, ".up.sql"), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return nil
}
