package idemriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/idemgen/idemgen/idem"
)

// A worker that dies mid-run (its process killed, its host lost) leaves
// its job running in River's eyes and the request's key in flight. River
// rescues such a job only once RescueStuckJobsAfter has passed since it
// started, which must be at least the worker's Timeout, and looks every 30
// seconds. The Rescuer takes the request over sooner: once the key's
// lease has passed, it inserts a job of its own for the request, which a
// live worker runs from the last recovery point. The fencing token keeps
// the two jobs from running the handler twice: the stuck job, once River
// rescues it, finds the request done.

// RescuerOptions configure a Rescuer; the zero value works.
type RescuerOptions struct {
	// Interval is the time between runs; zero means 10s.
	Interval time.Duration
	// Grace is how long a job must have been running, and its key's lease
	// passed, before its worker counts as dead: a worker that has just
	// failed a run releases the lease, and River records the failure a
	// moment later. Zero means 5s.
	Grace time.Duration
	// BatchSize bounds the jobs one run looks at; zero means 100.
	BatchSize int
	// Logger receives the rescues; nil uses slog.Default().
	Logger *slog.Logger
}

// Lookup reads a key's record: an idem.Store, such as pgstore's.
type Lookup interface {
	Lookup(ctx context.Context, id idem.ID) (idem.Record, error)
}

// Rescuer finds the jobs of async operations whose worker died, and
// inserts a job that takes the request over. Every instance may run one:
// a stuck job is rescued by one job only (River's unique jobs, by the
// stuck job's ID).
type Rescuer struct {
	client *river.Client[pgx.Tx]
	db     DB
	keys   Lookup
	opts   RescuerOptions
}

// DB is where the Rescuer reads River's jobs and inserts its own, in a
// transaction of its own: a pgxpool.Pool.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// NewRescuer returns a rescuer that reads River's jobs on db, the keys
// with keys, and inserts its jobs on db with client's InsertTx (client
// may be the one whose Workers run the async operations, or an
// insert-only one).
func NewRescuer(client *river.Client[pgx.Tx], db DB, keys Lookup, opts RescuerOptions) *Rescuer {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Grace <= 0 {
		opts.Grace = 5 * time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Rescuer{client: client, db: db, keys: keys, opts: opts}
}

// RescueRun is what one run of a Rescuer did: the running jobs of async
// operations it looked at, and those it rescued.
type RescueRun struct {
	Running, Rescued int
	Err              error
}

// Run runs the rescuer every Interval, after a random delay of up to a
// tenth of it, until ctx ends; it returns nil then. A failed run is
// logged and tried again at the next.
func (r *Rescuer) Run(ctx context.Context) error {
	for {
		t := time.NewTimer(r.opts.Interval + rand.N(r.opts.Interval/10+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if run := r.RunOnce(ctx); run.Err != nil && ctx.Err() == nil {
			r.opts.Logger.ErrorContext(ctx, "idemriver: rescuer: run failed; retrying at the next run", "error", run.Err)
		}
	}
}

// stuckJob is a running job of an async operation, as the rescuer reads it.
type stuckJob struct {
	id          int64
	queue       string
	maxAttempts int
	args        Args
}

// RunOnce looks at the jobs of async operations that have been running
// for at least Grace, and rescues those whose key's lease passed Grace ago
// or more.
func (r *Rescuer) RunOnce(ctx context.Context) RescueRun {
	var run RescueRun
	jobs, err := r.running(ctx)
	if err != nil {
		run.Err = err
		return run
	}
	run.Running = len(jobs)
	for _, j := range jobs {
		rescued, err := r.rescue(ctx, j)
		if err != nil {
			run.Err = errors.Join(run.Err, err)
			continue
		}
		if rescued {
			run.Rescued++
		}
	}
	return run
}

// running lists the jobs of async operations (their kind is JobKind's)
// running for Grace or longer, oldest first.
func (r *Rescuer) running(ctx context.Context) ([]stuckJob, error) {
	rows, err := r.db.Query(ctx, `SELECT id, queue, max_attempts, args FROM river_job
		WHERE state = 'running' AND kind LIKE 'idem.%' AND attempted_at < now() - $1 * interval '1 millisecond'
		ORDER BY id LIMIT $2`, r.opts.Grace.Milliseconds(), r.opts.BatchSize)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no River tables yet: nothing runs
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idemriver: rescuer: list running jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stuckJob, error) {
		var j stuckJob
		var raw []byte
		err := row.Scan(&j.id, &j.queue, &j.maxAttempts, &raw)
		if err == nil {
			err = json.Unmarshal(raw, &j.args)
		}
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("idemriver: rescuer: list running jobs: %w", err)
	}
	return jobs, nil
}

// rescue inserts a job for j's request when the request is still in
// flight under j's use of the key, and its lease passed Grace ago or more:
// no live worker holds it.
func (r *Rescuer) rescue(ctx context.Context, j stuckJob) (bool, error) {
	a := j.args.Accepted()
	if a.ID.Operation == "" {
		return false, nil // not a job of this package's
	}
	rec, err := r.keys.Lookup(ctx, a.ID)
	switch {
	case err != nil:
		return false, fmt.Errorf("idemriver: rescuer: read key %s: %w", idem.KeyHash(a.ID), err)
	case !rec.Found, rec.Completed, rec.Generation != a.Generation, rec.Held, rec.LeaseLeft > -r.opts.Grace:
		// Done, gone, another use, or a worker may still hold it: River's
		// rescuer ends the job in its time, and its run finds nothing to do.
		return false, nil
	}
	args := j.args
	args.Rescues = j.id
	res, err := r.insert(ctx, rescueJob{Args: args, kind: JobKind(a.ID.Operation)}, &river.InsertOpts{
		Queue: j.queue, MaxAttempts: j.maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true},
	})
	if err != nil {
		return false, fmt.Errorf("idemriver: rescuer: insert the job that takes key %s over: %w", idem.KeyHash(a.ID), err)
	}
	if res.UniqueSkippedAsDuplicate {
		return false, nil // rescued already, by this instance or another
	}
	r.opts.Logger.WarnContext(ctx, "idemriver: rescuer: a worker stopped mid-run; another job takes its request over",
		"operation", a.ID.Operation, "key_hash", idem.KeyHash(a.ID), "generation", a.Generation,
		"stuck_job", j.id, "job", res.Job.ID, "recovery_point", rec.RecoveryPoint)
	return true, nil
}

// insert inserts job in a transaction of its own on the rescuer's db.
func (r *Rescuer) insert(ctx context.Context, job river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	res, err := r.client.InsertTx(ctx, tx, job, opts)
	if err != nil {
		return nil, err
	}
	return res, tx.Commit(ctx)
}

// rescueJob is the job that takes over a stuck job's request: the same
// kind and arguments, and the stuck job's ID.
type rescueJob struct {
	Args
	kind string
}

func (j rescueJob) Kind() string { return j.kind }
