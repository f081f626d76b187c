// Package idemriver runs the requests of async operations (the
// annotation's mode: async) on River, the job queue on PostgreSQL: an
// accepted request's job is inserted with InsertTx in the transaction of
// its key's claim, and a River worker runs it with the engine, under the
// key's lease and fencing token. The generated code declares one job type
// and one worker per async operation with this package; River's retries,
// backoff, concurrency limits and graceful stop are River's own.
//
// Only an API with async operations imports this package, and so River.
package idemriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/idemgen/idemgen/idem"
)

// Args are what the job of an accepted request carries: its key, and the
// use of the key it runs. The request itself stays with the key. The
// generated job type of each async operation embeds Args and names the
// operation's kind.
type Args struct {
	Scope      string `json:"scope"`
	Operation  string `json:"operation"`
	Key        string `json:"key"`
	Generation int64  `json:"generation"`
	// Rescues, in a job the Rescuer inserted, is the ID of the job whose
	// worker died: one rescue per stuck job.
	Rescues int64 `json:"rescues,omitempty"`
}

// ArgsOf are the job arguments of accepted request a.
func ArgsOf(a idem.Accepted) Args {
	return Args{Scope: a.ID.Scope, Operation: a.ID.Operation, Key: a.ID.Key, Generation: a.Generation}
}

// Accepted is the accepted request the job runs.
func (a Args) Accepted() idem.Accepted {
	return idem.Accepted{ID: idem.ID{Scope: a.Scope, Operation: a.Operation, Key: a.Key}, Generation: a.Generation}
}

// JobArgs is the job type of an async operation: Args with its kind.
type JobArgs interface {
	river.JobArgs
	Accepted() idem.Accepted
}

// Enqueue returns the idem.Enqueue that inserts the job of an accepted
// request, made by newArgs, with client's InsertTx, on the transaction of
// the request's claim. client may be an insert-only client (no queues, no
// workers). T is the engine's transaction type, which must be the
// client's, pgx.Tx: with another store's, such as the in-memory one,
// the enqueue fails as a misconfigured store, since async operations
// need their jobs in the key store's own database.
func Enqueue[T any, A JobArgs](client *river.Client[pgx.Tx], newArgs func(idem.Accepted) A) idem.Enqueue[T] {
	return func(ctx context.Context, tx T, a idem.Accepted) error {
		ptx, ok := any(tx).(pgx.Tx)
		if !ok {
			return fmt.Errorf("%w: the jobs of async operations are inserted with River in a pgx.Tx, and the store's transactions are %T; use the Postgres store, pgstore", idem.ErrStoreMisconfigured, tx)
		}
		_, err := client.InsertTx(ctx, ptx, newArgs(a), nil)
		return err
	}
}

// NewInsertClient returns a River client that only inserts jobs, with
// the transactions it is given: what a server that accepts requests and
// runs no workers needs.
func NewInsertClient() (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(nil), &river.Config{})
}

// Worker is the River worker of an async operation: it runs the job's
// request with the engine (idem.Engine.RunAccepted) and stores its
// response.
type Worker[T any, A JobArgs] struct {
	river.WorkerDefaults[A]
	engine *idem.Engine[T]
	op     *idem.Operation
	phases func(ctx context.Context, request []byte) (idem.PhaseFunc[T], error)
	log    *slog.Logger
}

// NewWorker returns the worker of op's jobs on engine; phases rebuilds
// the handler's phases from a stored request (the generated code decodes
// it into the typed request object).
func NewWorker[T any, A JobArgs](engine *idem.Engine[T], op *idem.Operation, phases func(ctx context.Context, request []byte) (idem.PhaseFunc[T], error), log *slog.Logger) *Worker[T, A] {
	if log == nil {
		log = slog.Default()
	}
	return &Worker[T, A]{engine: engine, op: op, phases: phases, log: log}
}

// Timeout is the engine's bound on a run (idem.Engine.RunBound: each
// phase within the operation's lease), not River's JobTimeout: a run
// never outlasts it, and River's rescuer takes a job running longer (its
// worker died) for stuck, once RescueStuckJobsAfter has passed too.
func (w *Worker[T, A]) Timeout(*river.Job[A]) time.Duration { return w.engine.RunBound(w.op) }

// Work runs one attempt of a job. A request that another worker holds is
// snoozed until its lease passes (River counts no attempt for it), and so
// is one whose run River's stop cut off, to run again at once on the next
// worker; a failed run is River's to retry with its backoff; the last
// attempt's failure stores the async-request-failed problem as the
// request's response, which its status resource and every retry of its
// key answer.
func (w *Worker[T, A]) Work(ctx context.Context, job *river.Job[A]) error {
	a := job.Args.Accepted()
	run, err := w.engine.RunAccepted(ctx, w.op, a, w.phases)
	switch {
	case err == nil && run.RetryIn > 0:
		return river.JobSnooze(run.RetryIn)
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		// River is stopping (StopAndCancel): not the request's failure.
		return river.JobSnooze(0)
	case job.Attempt < job.MaxAttempts:
		return err
	}
	w.log.ErrorContext(ctx, "idem: async request failed on its last attempt; storing the failure", "operation", w.op.Name,
		"key_hash", idem.KeyHash(a.ID), "attempts", job.Attempt, "error", err)
	// The run may have ended at its deadline: the failure is stored
	// within a bound of its own.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.engine.RunBound(w.op))
	defer cancel()
	failed, ferr := w.engine.FailAccepted(fctx, w.op, a, idem.AttemptsExhaustedProblem(job.Attempt))
	switch {
	case ferr != nil:
		return errors.Join(err, ferr)
	case failed.RetryIn > 0:
		return river.JobSnooze(failed.RetryIn)
	}
	return river.JobCancel(err)
}

// Migrate applies River's migrations to the database of pool with
// River's own rivermigrate, each in a transaction of its own (some of
// River's cannot share one) under an advisory lock, so that servers
// starting together on a new database apply each once: the others wait,
// then find it applied. Apply the key store's migrations too
// (pgstore.Migrate): async operations need both.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := MigrateUp(ctx, pool)
	return err
}

// Migration is one of River's migrations, as MigrateUp applied it or
// MigrationStatus reports it.
type Migration struct {
	Version  int
	Name     string
	Duration time.Duration // the time it took to apply; zero in a status
	Applied  bool          // in a status: whether the database has it
}

// MigrateUp is Migrate, returning the migrations it applied, in order.
func MigrateUp(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("idemriver: migrate: %w", err)
	}
	var applied []Migration
	for {
		step, err := migrateStep(ctx, pool, m)
		if err != nil {
			return applied, fmt.Errorf("idemriver: migrate River's tables: %w", err)
		}
		if step == nil {
			return applied, nil
		}
		applied = append(applied, *step)
	}
}

// MigrationStatus lists River's migrations this build knows, and whether
// the database at pool has each.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("idemriver: migration status: %w", err)
	}
	existing := map[int]bool{}
	ex, err := m.ExistingVersions(ctx)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // no River tables yet
	case err != nil:
		return nil, fmt.Errorf("idemriver: migration status: %w", err)
	}
	for _, v := range ex {
		existing[v.Version] = true
	}
	var all []Migration
	for _, v := range m.AllVersions() {
		all = append(all, Migration{Version: v.Version, Name: v.Name, Applied: existing[v.Version]})
	}
	return all, nil
}

// migrateStep applies the next of River's migrations the database lacks,
// and returns it; nil when there is none.
func migrateStep(ctx context.Context, pool *pgxpool.Pool, m *rivermigrate.Migrator[pgx.Tx]) (*Migration, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, MigrateLock); err != nil {
		return nil, fmt.Errorf("wait for other migrators: %w", err)
	}
	res, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{MaxSteps: 1})
	if err != nil {
		return nil, err
	}
	if len(res.Versions) == 0 {
		return nil, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	v := res.Versions[0]
	return &Migration{Version: v.Version, Name: v.Name, Duration: v.Duration}, nil
}

// MigrateLock is the transaction-scoped advisory lock Migrate holds while
// it applies one of River's migrations: "idemrivr" in ASCII. The River
// migration files idemgen writes take it too, so that a migration tool
// and Migrate never apply a version at once.
const MigrateLock int64 = 0x6964656d72697672

// Job is the River job of an accepted request, as FindJob reads it.
type Job struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	State       string `json:"state"` // River's: available, running, retryable, completed, cancelled, discarded, ...
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
}

// JobKind is the kind of the jobs of async operation operation, as the
// generated job types name them.
func JobKind(operation string) string { return "idem." + operation }

// FindJob reads the newest River job of key id's use generation, for
// operators (idemgen keys show). It reports false when there is none, or
// when the database has no River tables.
func FindJob(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id idem.ID, generation int64) (Job, bool, error) {
	var j Job
	err := db.QueryRow(ctx, `SELECT id, kind, state::text, attempt, max_attempts FROM river_job
		WHERE kind = $1 AND args->>'operation' = $2 AND args->>'scope' = $3 AND args->>'key' = $4
		  AND (args->>'generation')::bigint = $5
		ORDER BY id DESC LIMIT 1`,
		JobKind(id.Operation), id.Operation, id.Scope, id.Key, generation).Scan(&j.ID, &j.Kind, &j.State, &j.Attempt, &j.MaxAttempts)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: no River here
		return Job{}, false, nil
	case err != nil:
		return Job{}, false, fmt.Errorf("idemriver: find the job of key %s: %w", idem.KeyHash(id), err)
	}
	return j, true, nil
}
