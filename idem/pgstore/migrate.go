package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgen/idemgen/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrateLock serialises migrations across processes starting at once.
const migrateLock = 0x6964656d67656e // "idemgen"

// ErrSchemaNewer reports a database whose key store was migrated by newer
// code than this, past what this code may serve: running on it could
// misread rows the newer code writes.
var ErrSchemaNewer = errors.New("pgstore: the key store's schema is newer than this code")

// ErrMigrationLocked reports a migration that could not take its locks
// within MigrateOptions.LockTimeout on any of its attempts: the table was
// busy the whole time. Nothing of that migration was applied.
var ErrMigrationLocked = errors.New("pgstore: a migration could not take its locks")

// Defaults of MigrateOptions.
const (
	DefaultMigrateLockTimeout = time.Second
	DefaultMigrateAttempts    = 30
)

// MigrateOptions configure a Migrator. The zero value works.
type MigrateOptions struct {
	// LockTimeout bounds how long each statement of a migration waits
	// for a lock (PostgreSQL's lock_timeout). A migration that must wait
	// for a busy table gives up after it, rolls back and tries again
	// later, so requests queued behind its lock wait at most this long.
	// Defaults to DefaultMigrateLockTimeout.
	LockTimeout time.Duration
	// Attempts is how often a migration is tried before Up or Down
	// return ErrMigrationLocked, with a growing pause (up to 2s) between
	// tries. Defaults to DefaultMigrateAttempts.
	Attempts int
	// Logger receives a record per migration applied or rolled back and
	// per retry; nil logs nothing.
	Logger *slog.Logger
}

func (o MigrateOptions) withDefaults() MigrateOptions {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultMigrateLockTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultMigrateAttempts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Migrator applies, rolls back and reports the key store's migrations
// (package schema), recorded in the table idemgen_schema_migrations.
// Each migration runs in a transaction of its own, under an advisory
// lock that serialises migrators, with a lock_timeout: a busy key table
// delays the migration, never the requests.
type Migrator struct {
	db   DB
	opts MigrateOptions
	all  []migration
}

// NewMigrator returns a Migrator of db. It fails only when the embedded
// migrations are malformed.
func NewMigrator(db DB, opts MigrateOptions) (*Migrator, error) {
	all, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("pgstore: list migrations: %w", err)
	}
	return &Migrator{db: db, opts: opts.withDefaults(), all: all}, nil
}

// Latest is the number of the newest migration this code knows.
func (m *Migrator) Latest() int { return m.all[len(m.all)-1].version }

// MigrationResult is one migration applied or rolled back.
type MigrationResult struct {
	Version  int
	Name     string        // 0009_derived_by_default
	Duration time.Duration // of the attempt that succeeded
	Retries  int           // attempts that gave up on a lock first
}

// MigrationStatus is one migration as the database and this code know it.
type MigrationStatus struct {
	Version int
	Name    string
	// Applied is when the database recorded it; zero when it has not.
	Applied time.Time
	// Known is false for a migration the database has and this code does
	// not: newer code applied it.
	Known bool
	// CompatibleFrom is the oldest migration whose code may serve a
	// database with this one applied; 0 when only code that knows this
	// one may.
	CompatibleFrom int
}

// Up applies the migrations the database lacks, in order, up to and
// including target (0: all of them), and returns those it applied. It
// applies nothing to a database that newer code migrated past what this
// code may serve (ErrSchemaNewer); one migrated further by code that
// declared this schema compatible is left as it is.
func (m *Migrator) Up(ctx context.Context, target int) ([]MigrationResult, error) {
	if target == 0 {
		target = m.Latest()
	}
	if !slices.ContainsFunc(m.all, func(x migration) bool { return x.version == target }) {
		return nil, fmt.Errorf("pgstore: migrate up: no migration %d; this code knows %s", target, m.known())
	}
	var done []MigrationResult
	for {
		var alone *migration
		r, err := m.step(ctx, "up", func(ctx context.Context, tx pgx.Tx, applied []appliedMigration) (*migration, error) {
			if err := servable(applied, m.all[len(m.all)-1]); err != nil {
				return nil, err
			}
			// Read afresh on every try: another migrator may have applied
			// the one a try that gave up on its lock had found.
			next := m.nextUp(applied, target)
			if next == nil {
				return nil, nil
			}
			if next.upAlone {
				alone = next
				return nil, nil
			}
			if _, err := tx.Exec(ctx, next.up); err != nil {
				return nil, fmt.Errorf("pgstore: migrate up %s: %w", next.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name, compatible_from) VALUES ($1, $2, nullif($3, 0))`,
				next.version, next.name, next.compatibleFrom); err != nil {
				return nil, fmt.Errorf("pgstore: migrate up %s: record it: %w", next.name, err)
			}
			return next, nil
		})
		if err == nil && alone != nil {
			r, err = m.stepAlone(ctx, "up", func(ctx context.Context, conn *pgx.Conn, applied []appliedMigration) (*migration, error) {
				if err := servable(applied, m.all[len(m.all)-1]); err != nil {
					return nil, err
				}
				if next := m.nextUp(applied, target); next != alone {
					return next, errMovedOn // another migrator went on meanwhile
				}
				// A build cut short (a CREATE INDEX CONCURRENTLY whose
				// process died) leaves an invalid index that would stay:
				// the down file clears what is left of it.
				if _, err := conn.Exec(ctx, alone.down); err != nil {
					return nil, fmt.Errorf("pgstore: migrate up %s: clear what an earlier try left: %w", alone.name, err)
				}
				if _, err := conn.Exec(ctx, alone.up); err != nil {
					return nil, fmt.Errorf("pgstore: migrate up %s: %w", alone.name, err)
				}
				if _, err := conn.Exec(ctx, `INSERT INTO idemgen_schema_migrations (version, name, compatible_from) VALUES ($1, $2, nullif($3, 0))`,
					alone.version, alone.name, alone.compatibleFrom); err != nil {
					return nil, fmt.Errorf("pgstore: migrate up %s: record it: %w", alone.name, err)
				}
				return alone, nil
			})
			if errors.Is(err, errMovedOn) {
				continue
			}
		}
		if err != nil || r == nil {
			return done, err
		}
		done = append(done, *r)
	}
}

// nextUp is the first of this code's migrations up to target that the
// database lacks; nil when it has them all.
func (m *Migrator) nextUp(applied []appliedMigration, target int) *migration {
	for i := range m.all {
		if x := &m.all[i]; x.version <= target && !isApplied(applied, x.version) {
			return x
		}
	}
	return nil
}

// errMovedOn tells Up and Down that, by the time a migration outside a
// transaction had its lock, another migrator had applied or rolled it
// back: the next one is looked for again.
var errMovedOn = errors.New("pgstore: migrate: another migrator went on")

// Down rolls back the applied migrations numbered above target, newest
// first, each with its down file, and returns those it rolled back. It
// refuses a database that holds migrations this code does not know: roll
// those back with the release that applied them.
func (m *Migrator) Down(ctx context.Context, target int) ([]MigrationResult, error) {
	if target < 0 || target > m.Latest() {
		return nil, fmt.Errorf("pgstore: migrate down: target %d is not one of this code's migrations (%s), or 0 for none", target, m.known())
	}
	var done []MigrationResult
	for {
		var alone *migration
		r, err := m.step(ctx, "down", func(ctx context.Context, tx pgx.Tx, applied []appliedMigration) (*migration, error) {
			x, err := m.nextDown(applied, target)
			if x == nil || err != nil {
				return nil, err
			}
			if x.downAlone {
				alone = x
				return nil, nil
			}
			if _, err := tx.Exec(ctx, x.down); err != nil {
				return nil, fmt.Errorf("pgstore: migrate down %s: %w", x.name, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM idemgen_schema_migrations WHERE version = $1`, x.version); err != nil {
				return nil, fmt.Errorf("pgstore: migrate down %s: unrecord it: %w", x.name, err)
			}
			return x, nil
		})
		if err == nil && alone != nil {
			r, err = m.stepAlone(ctx, "down", func(ctx context.Context, conn *pgx.Conn, applied []appliedMigration) (*migration, error) {
				if x, err := m.nextDown(applied, target); x != alone || err != nil {
					return x, errors.Join(errMovedOn, err)
				}
				if _, err := conn.Exec(ctx, alone.down); err != nil {
					return nil, fmt.Errorf("pgstore: migrate down %s: %w", alone.name, err)
				}
				if _, err := conn.Exec(ctx, `DELETE FROM idemgen_schema_migrations WHERE version = $1`, alone.version); err != nil {
					return nil, fmt.Errorf("pgstore: migrate down %s: unrecord it: %w", alone.name, err)
				}
				return alone, nil
			})
			if errors.Is(err, errMovedOn) {
				continue
			}
		}
		if err != nil || r == nil {
			return done, err
		}
		done = append(done, *r)
	}
}

// nextDown is the newest applied migration above target, which Down rolls
// back next; nil when there is none.
func (m *Migrator) nextDown(applied []appliedMigration, target int) (*migration, error) {
	if len(applied) == 0 || applied[len(applied)-1].version <= target {
		return nil, nil
	}
	last := applied[len(applied)-1]
	i := slices.IndexFunc(m.all, func(x migration) bool { return x.version == last.version })
	if i < 0 {
		return nil, fmt.Errorf("%w: the database has migration %s, which this code does not know; roll it back with the release that applied it (its idemgen migrate down -to %d)",
			ErrSchemaNewer, last.name, m.Latest())
	}
	return &m.all[i], nil
}

// Status lists this code's migrations and any newer ones the database
// has, in order, with what the database recorded of each.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	tx, err := m.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migration status: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('idemgen_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pgstore: migration status: %w", err)
	}
	var applied []appliedMigration
	if exists {
		if applied, err = appliedVersions(ctx, tx); err != nil {
			return nil, err
		}
	}
	var out []MigrationStatus
	for _, x := range m.all {
		s := MigrationStatus{Version: x.version, Name: x.name, Known: true, CompatibleFrom: x.compatibleFrom}
		if i := slices.IndexFunc(applied, func(a appliedMigration) bool { return a.version == x.version }); i >= 0 {
			s.Applied = applied[i].appliedAt
		}
		out = append(out, s)
	}
	for _, a := range applied {
		if a.version > m.Latest() {
			out = append(out, MigrationStatus{Version: a.version, Name: a.name, Applied: a.appliedAt, CompatibleFrom: a.compatibleFrom})
		}
	}
	return out, nil
}

// step runs one migration's transaction: it takes the migrators' lock,
// bounds lock waits, reads what is applied and lets do apply one
// migration. A lock that cannot be had in time rolls it all back, and it
// is tried again after a pause. It returns nil when do found nothing to
// do.
func (m *Migrator) step(ctx context.Context, dir string, do func(context.Context, pgx.Tx, []appliedMigration) (*migration, error)) (*MigrationResult, error) {
	return m.retry(ctx, dir, func() (*migration, error) { return m.try(ctx, do) })
}

// retry runs one try of a migration until it succeeds, or fails for a
// cause other than a lock, or has been tried Attempts times.
func (m *Migrator) retry(ctx context.Context, dir string, once func() (*migration, error)) (*MigrationResult, error) {
	for try := 0; ; try++ {
		start := time.Now()
		x, err := once()
		if err == nil {
			if x == nil {
				return nil, nil
			}
			r := &MigrationResult{Version: x.version, Name: x.name, Duration: time.Since(start), Retries: try}
			m.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "idem: key-store migration "+dir,
				slog.String("migration", x.name), slog.Duration("took", r.Duration), slog.Int("retries", try))
			return r, nil
		}
		if !isLockTimeout(err) {
			return nil, err
		}
		if try+1 >= m.opts.Attempts {
			return nil, fmt.Errorf("%w within %s on any of %d attempts (%v); the key table was busy all along: run it again when it is quieter, or with a longer -lock-timeout",
				ErrMigrationLocked, m.opts.LockTimeout, m.opts.Attempts, err)
		}
		pause := min(50*time.Millisecond<<min(try, 6), 2*time.Second)
		pause = pause/2 + rand.N(pause/2+1)
		m.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "idem: key-store migration waits for a busy table",
			slog.String("direction", dir), slog.Int("attempt", try+1), slog.Duration("retry_in", pause), slog.String("error", err.Error()))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, fmt.Errorf("pgstore: migrate %s: %w", dir, ctx.Err())
		}
	}
}

// stepAlone runs one migration that cannot run in a transaction, such as
// a CREATE INDEX CONCURRENTLY, which lets writes to the table go on while
// it builds: on a session of its own that holds the migrators' lock (the
// session kind of the lock step takes) from before it reads what is
// applied until do has recorded what it did. No lock_timeout bounds its
// statements: they take no lock that stalls requests, and they wait for
// the transactions that run before them to end. A deadlock with an older
// migrator that waits for the migrators' lock inside a transaction (which
// such a build waits for in turn) is retried as a busy lock is.
func (m *Migrator) stepAlone(ctx context.Context, dir string, do func(context.Context, *pgx.Conn, []appliedMigration) (*migration, error)) (*MigrationResult, error) {
	return m.retry(ctx, dir, func() (*migration, error) { return m.tryAlone(ctx, do) })
}

func (m *Migrator) tryAlone(ctx context.Context, do func(context.Context, *pgx.Conn, []appliedMigration) (*migration, error)) (*migration, error) {
	conn, release, err := session(ctx, m.db)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer release()
	// Each try is a transaction of its own, as lockedTx's are.
	err = lockMigrators(ctx, func() (got bool, err error) {
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(migrateLock)).Scan(&got)
		return got, err
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrateLock)); err != nil {
			// A session left holding the lock would stop every migrator.
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	var applied []appliedMigration
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := versionTable(ctx, tx); err != nil {
			return err
		}
		applied, err = appliedVersions(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return do(ctx, conn, applied)
}

// lockedTx begins a transaction that holds the migrators' lock. It never
// waits for the lock inside a statement, nor in a transaction: a CREATE
// INDEX CONCURRENTLY that another migrator runs under the lock waits for
// every transaction that was open when it began, and one waiting for its
// lock would never end. So it tries the lock, and while another migrator
// has it, ends the transaction and tries again after a pause.
func (m *Migrator) lockedTx(ctx context.Context) (pgx.Tx, error) {
	var tx pgx.Tx
	err := lockMigrators(ctx, func() (bool, error) {
		var err error
		if tx, err = m.db.Begin(ctx); err != nil {
			return false, err
		}
		var got bool
		if err = tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", int64(migrateLock)).Scan(&got); err != nil || !got {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		return got, err
	})
	return tx, err
}

// lockMigrators calls try, which tries to take the migrators' lock, until
// it has it, pausing in between.
func lockMigrators(ctx context.Context, try func() (bool, error)) error {
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		got, err := try()
		if err != nil {
			return fmt.Errorf("pgstore: migrate: lock: %w", err)
		}
		if got {
			return nil
		}
		select {
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		case <-ctx.Done():
			return fmt.Errorf("pgstore: migrate: wait for another migrator: %w", ctx.Err())
		}
	}
}

// session returns a connection of db to hold for statements that must
// share a session, and what gives it back.
func session(ctx context.Context, db DB) (*pgx.Conn, func(), error) {
	switch db := db.(type) {
	case *pgx.Conn:
		return db, func() {}, nil
	case interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
	}:
		c, err := db.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Conn(), c.Release, nil
	}
	return nil, nil, fmt.Errorf("a migration that runs outside a transaction needs a connection of its own, which a %T cannot lend: migrate with a *pgxpool.Pool or a *pgx.Conn", db)
}

func (m *Migrator) try(ctx context.Context, do func(context.Context, pgx.Tx, []appliedMigration) (*migration, error)) (*migration, error) {
	tx, err := m.lockedTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Set after the migrators' lock, which is theirs alone to wait for.
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", strconv.FormatInt(m.opts.LockTimeout.Milliseconds(), 10)); err != nil {
		return nil, fmt.Errorf("pgstore: migrate: lock_timeout: %w", err)
	}
	if err := versionTable(ctx, tx); err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return nil, err
	}
	x, err := do(ctx, tx, applied)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return x, nil
}

// versionTable creates idemgen_schema_migrations where it is missing;
// compatible_from (see migration.compatibleFrom) came after the table,
// and is NULL on the rows written before it.
func versionTable(ctx context.Context, tx pgx.Tx) error {
	var has bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
		WHERE attrelid = to_regclass('idemgen_schema_migrations') AND attname = 'compatible_from' AND NOT attisdropped)`).Scan(&has); err != nil {
		return fmt.Errorf("pgstore: migrate: version table: %w", err)
	}
	if has {
		return nil
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS idemgen_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	);
	ALTER TABLE idemgen_schema_migrations ADD COLUMN IF NOT EXISTS compatible_from integer`); err != nil {
		return fmt.Errorf("pgstore: migrate: version table: %w", err)
	}
	return nil
}

// isLockTimeout reports a migration that gave up waiting for a lock, or
// was picked as a deadlock's victim: both leave nothing applied, and a
// later try may pass.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

func (m *Migrator) known() string {
	return fmt.Sprintf("%s to %s", m.all[0].name, m.all[len(m.all)-1].name)
}

// Migrate applies the key-store migrations the database lacks (see
// Migrator.Up, with default options), then the application's own SQL
// scripts (see Migrator.Apply). Processes that start at once all succeed,
// one after the other. Teams with a migration tool use the files idemgen
// generates instead, or run `idemgen migrate up` before they deploy.
func Migrate(ctx context.Context, db DB, then ...string) error {
	m, err := NewMigrator(db, MigrateOptions{})
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx, 0); err != nil {
		return err
	}
	return m.Apply(ctx, then...)
}

// Apply runs the application's own SQL scripts, each in a transaction of
// its own under the migrators' lock and with the lock timeout and
// retries of a migration, on every call: they must be re-runnable, as
// CREATE ... IF NOT EXISTS is. Never in a key-store migration's
// transaction: DDL there would hold the key table while waiting on the
// application's tables, and stall every request.
func (m *Migrator) Apply(ctx context.Context, scripts ...string) error {
	for i, sql := range scripts {
		_, err := m.step(ctx, "apply", func(ctx context.Context, tx pgx.Tx, _ []appliedMigration) (*migration, error) {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return nil, fmt.Errorf("pgstore: migrate: the application's script %d: %w", i+1, err)
			}
			return nil, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// migration is one numbered migration of package schema.
type migration struct {
	version  int
	name     string // 0002_phased_attempts
	up, down string
	// upAlone and downAlone are set for a file that says "--
	// no-transaction" on a line of its own: its one statement cannot run
	// in a transaction (see Migrator.stepAlone).
	upAlone, downAlone bool
	// compatibleFrom is the oldest migration whose code may still serve
	// a database with this one applied (the up file's "-- compatible-from:"
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
		up, err := fs.ReadFile(schema.FS, file)
		if err != nil {
			return nil, err
		}
		down, err := fs.ReadFile(schema.FS, name+".down.sql")
		if err != nil {
			return nil, fmt.Errorf("migration %s has no down file: %w", name, err)
		}
		from, err := compatibleFrom(string(up))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", file, err)
		}
		out = append(out, migration{version: version, name: name, up: string(up), down: string(down),
			upAlone: schema.OutsideTransaction(string(up)), downAlone: schema.OutsideTransaction(string(down)), compatibleFrom: from})
	}
	return out, nil
}

// appliedMigration is a row of idemgen_schema_migrations.
type appliedMigration struct {
	version        int
	name           string
	appliedAt      time.Time
	compatibleFrom int // 0: declared none
}

func isApplied(applied []appliedMigration, version int) bool {
	return slices.ContainsFunc(applied, func(a appliedMigration) bool { return a.version == version })
}

// servable refuses a database migrated past latest, unless every
// migration past it declares code that knows latest compatible.
func servable(applied []appliedMigration, latest migration) error {
	for _, a := range applied {
		if a.version <= latest.version || (a.compatibleFrom > 0 && a.compatibleFrom <= latest.version) {
			continue
		}
		return fmt.Errorf("%w: the database is at key-store migration %s, which code that knows migrations only up to %d (%s) may not serve; deploy the release that migrated it, or roll the database back with that release's `idemgen migrate down -to %d`, then start this one",
			ErrSchemaNewer, a.name, latest.version, latest.name, latest.version)
	}
	return nil
}

func appliedVersions(ctx context.Context, tx pgx.Tx) ([]appliedMigration, error) {
	// A version table from before compatible_from has none: Status
	// reads it as it is, without adding the column.
	var has bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
		WHERE attrelid = 'idemgen_schema_migrations'::regclass AND attname = 'compatible_from' AND NOT attisdropped)`).Scan(&has); err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	compatible := "0"
	if has {
		compatible = "coalesce(compatible_from, 0)"
	}
	rows, err := tx.Query(ctx, `SELECT version, name, applied_at, `+compatible+` FROM idemgen_schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appliedMigration, error) {
		var a appliedMigration
		err := row.Scan(&a.version, &a.name, &a.appliedAt, &a.compatibleFrom)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrate: read applied versions: %w", err)
	}
	return versions, nil
}
