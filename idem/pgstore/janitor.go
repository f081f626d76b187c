package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

const (
	defaultAbandonedFor = time.Hour
	defaultSweepBatch   = 500
	defaultReapBatch    = 1000
	defaultInterval     = time.Minute

	defaultStatementTimeout = 30 * time.Second
	// maxDefaultJitter caps the default Jitter, a tenth of Interval.
	maxDefaultJitter = 5 * time.Second
	// timeoutGrace is how much longer than StatementTimeout the client
	// waits for the server's own cancellation before giving up on the
	// connection.
	timeoutGrace = time.Second

	// maxListed bounds the abandoned attempts one report logs; the count
	// in the summary says how many there are in all.
	maxListed = 100
)

// SweepOptions configure Store.Sweep. The zero value reports attempts
// abandoned for an hour or more and changes nothing.
type SweepOptions struct {
	// AbandonedFor is how long after its lease ended an in-flight attempt
	// counts as abandoned by its client; zero means one hour.
	AbandonedFor time.Duration
	// Fail marks abandoned attempts failed by storing the attempt-abandoned
	// problem (500, type idem.TypeAttemptAbandoned) as their response, so a
	// retry gets that answer instead of resuming. Without it they are left
	// for a retry to take over, and only reported.
	Fail bool
	// Problems renders the stored problem in the API's error shape, as
	// idem.Options.Problems does the layer's other answers; nil is
	// problem+json.
	Problems idem.ProblemShape
	// BatchSize bounds the rows one statement changes; zero means 500.
	BatchSize int
	// StatementTimeout bounds each statement Sweep sends, waits for locks
	// included; zero means 30s, negative means no bound of its own (the
	// server's statement_timeout applies). The server stops a statement
	// that runs longer, and Sweep returns a *StatementTimeoutError.
	StatementTimeout time.Duration
	// DryRun counts what would change and changes nothing.
	DryRun bool
	// Logger receives what was done; nil uses slog.Default().
	Logger *slog.Logger
}

// SweepResult is what Store.Sweep found and did.
type SweepResult struct {
	// Abandoned counts the abandoned attempts found with DryRun or without
	// Fail. Being a plain read, it includes any that a transaction holds
	// right now, which a sweep with Fail would skip.
	Abandoned int
	// Failed counts the attempts marked failed.
	Failed int
	// Batches counts the statements that changed rows.
	Batches int
}

// DefaultEmptiedFor is how long Reap keeps an emptied row after its key's
// TTL ended. Providers forget the idempotency keys they were sent within
// days (Stripe after 24 hours, others after 7 or 30 days); past the
// longest of those, the key's next use may derive the same keys as its
// first again, so its row need not stay.
const DefaultEmptiedFor = 90 * 24 * time.Hour

// ReapOptions configure Store.Reap; the zero value works.
type ReapOptions struct {
	// EmptiedFor is how long the emptied row of a key whose attempts
	// derived keys is kept after its TTL ended, before it is deleted:
	// longer than any provider the operations send derived keys to
	// remembers a key. Once it is deleted, the key's next use is its
	// first again and derives the first use's keys, which such a provider
	// would take for a retry of the first use. Zero means
	// DefaultEmptiedFor; negative keeps emptied rows for ever.
	EmptiedFor time.Duration
	// BatchSize bounds the rows one statement deletes; zero means 1000.
	BatchSize int
	// StatementTimeout bounds each statement Reap sends, as
	// SweepOptions.StatementTimeout does; zero means 30s, negative means
	// no bound.
	StatementTimeout time.Duration
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// Logger receives what was done; nil uses slog.Default().
	Logger *slog.Logger
}

// ReapResult is what Store.Reap did.
type ReapResult struct {
	// Deleted counts the keys deleted or, with DryRun, that would be
	// deleted or emptied.
	Deleted int
	// Emptied counts the keys whose attempts derived keys: their rows are
	// emptied (no fingerprint, no response) instead of deleted, keeping
	// the key's generation, so that its next use derives keys never used
	// before.
	Emptied int
	// DeletedEmptied counts the emptied rows deleted (or, with DryRun,
	// that would be) once they were emptied for ReapOptions.EmptiedFor.
	DeletedEmptied int
	// Batches counts the statements that deleted rows.
	Batches int
}

// Sweep finds in-flight attempts whose lease ended at least AbandonedFor
// ago: their client stopped retrying them. With Fail it stores the
// attempt-abandoned problem as their response, in batches; otherwise, or
// with DryRun, it logs them and changes nothing.
//
// Rows another transaction holds, such as a phase that is still running,
// are skipped rather than waited for, so sweeps on several instances
// share the work and never block requests. When ctx ends between batches,
// or a statement runs past StatementTimeout, Sweep returns what it did so
// far with the error.
func (s *Store) Sweep(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	return s.sweep(ctx, opts, nil)
}

// sweep is Sweep, calling pause, when not nil, between two batches.
func (s *Store) sweep(ctx context.Context, opts SweepOptions, pause func(context.Context)) (SweepResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return SweepResult{}, fmt.Errorf("pgstore: sweep: %w", err)
	}
	if opts.Fail && !opts.DryRun {
		return s.failAbandoned(ctx, opts, pause)
	}
	return s.reportAbandoned(ctx, opts)
}

func (o SweepOptions) withDefaults() (SweepOptions, error) {
	if o.AbandonedFor < 0 {
		return o, fmt.Errorf("negative AbandonedFor %v", o.AbandonedFor)
	}
	if o.AbandonedFor == 0 {
		o.AbandonedFor = defaultAbandonedFor
	}
	batch, err := batchSize(o.BatchSize, defaultSweepBatch)
	if err != nil {
		return o, err
	}
	o.BatchSize = batch
	if o.StatementTimeout == 0 {
		o.StatementTimeout = defaultStatementTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

func (o ReapOptions) withDefaults() (ReapOptions, error) {
	batch, err := batchSize(o.BatchSize, defaultReapBatch)
	if err != nil {
		return o, err
	}
	o.BatchSize = batch
	if o.EmptiedFor == 0 {
		o.EmptiedFor = DefaultEmptiedFor
	}
	if o.StatementTimeout == 0 {
		o.StatementTimeout = defaultStatementTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

func batchSize(n, def int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > math.MaxInt32:
		return 0, fmt.Errorf("invalid BatchSize %d: want 1 to %d, or 0 for %d", n, math.MaxInt32, def)
	}
	return n, nil
}

// StatementTimeoutError reports a statement of Sweep or Reap that ran
// past its StatementTimeout, such as one waiting for a lock a migration
// holds. What earlier batches did stands.
type StatementTimeoutError struct {
	Timeout time.Duration
	// Err is the server's cancellation (SQLSTATE 57014) or, when the
	// server did not answer a second later, the context's deadline.
	Err error
}

func (e *StatementTimeoutError) Error() string {
	return fmt.Sprintf("statement timed out after %v (StatementTimeout): %v", e.Timeout, e.Err)
}

func (e *StatementTimeoutError) Unwrap() error { return e.Err }

// timedStatement runs f, one statement of Sweep or Reap, within timeout
// d, or without a bound when d is negative. The server enforces d itself
// (SET LOCAL statement_timeout): a context deadline alone would close the
// connection and leave the statement queued on the server, to do its work
// unseen once the lock it waits for is free. The context's deadline, a
// second later, covers a server that does not answer at all.
func (s *Store) timedStatement(ctx context.Context, d time.Duration, f func(context.Context, *dbsqlc.Queries) error) error {
	if d < 0 {
		return f(ctx, s.q)
	}
	sctx, cancel := context.WithTimeout(ctx, d+timeoutGrace)
	defer cancel()
	err := s.timedTx(sctx, d, f)
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || queryCanceled(err)) {
		return &StatementTimeoutError{Timeout: d, Err: err}
	}
	return err
}

// timedTx runs f in a transaction of its own whose statement_timeout is d.
func (s *Store) timedTx(ctx context.Context, d time.Duration, f func(context.Context, *dbsqlc.Queries) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	// A no-op once committed.
	defer func() { _ = tx.Rollback(ctx) }()
	// Rounded up to a millisecond: a statement_timeout of 0 means none.
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", ms)); err != nil {
		return err
	}
	if err := f(ctx, dbsqlc.New(tx)); err != nil {
		return err
	}
	// A batch that ran is committed even if ctx ended meanwhile, as it
	// would have been outside a transaction: Sweep and Reap stop after the
	// batch in progress, and report it.
	deadline, _ := ctx.Deadline()
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return tx.Commit(cctx)
}

// queryCanceled reports whether the server canceled the statement, as its
// statement_timeout does.
func queryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014" // query_canceled
}

func (s *Store) failAbandoned(ctx context.Context, opts SweepOptions, pause func(context.Context)) (SweepResult, error) {
	start := time.Now()
	resp := idem.Render(opts.Problems, idem.AbandonedProblem())
	headers, err := json.Marshal(resp.Header)
	if err != nil {
		return SweepResult{}, fmt.Errorf("pgstore: sweep: encode response headers: %w", err)
	}
	params := dbsqlc.FailAbandonedParams{
		ResponseStatus:  pgtype.Int4{Int32: int32(resp.Status), Valid: true},
		ResponseHeaders: headers,
		ResponseBody:    resp.Body,
		AbandonedForMs:  opts.AbandonedFor.Milliseconds(),
		BatchSize:       int32(opts.BatchSize),
	}
	var res SweepResult
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("pgstore: sweep: %w", err)
		}
		var rows []dbsqlc.FailAbandonedRow
		err := s.timedStatement(ctx, opts.StatementTimeout, func(ctx context.Context, q *dbsqlc.Queries) (err error) {
			rows, err = q.FailAbandoned(ctx, params)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("pgstore: sweep: fail abandoned attempts: %w", err)
		}
		if len(rows) > 0 {
			res.Batches++
			res.Failed += len(rows)
		}
		for _, r := range rows {
			opts.Logger.LogAttrs(ctx, slog.LevelInfo, "idem: failed abandoned attempt",
				slog.String("operation", r.Operation),
				slog.String("scope", r.Scope),
				slog.String("key", r.Key),
				slog.String("recovery_point", r.RecoveryPoint),
				slog.Int("attempt", int(r.Attempt)),
				slog.Time("lease_ended", r.LeaseEnded.Time))
		}
		// A short batch means no unheld abandoned row was left when it ran;
		// rows held by other sweepers are theirs to finish.
		if len(rows) < opts.BatchSize {
			break
		}
		if pause != nil {
			pause(ctx)
		}
	}
	opts.Logger.LogAttrs(ctx, quietIfNone(res.Failed), "idem: swept abandoned attempts",
		slog.Int("failed", res.Failed),
		slog.Int("batches", res.Batches),
		slog.Duration("took", time.Since(start)))
	return res, nil
}

func (s *Store) reportAbandoned(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	start := time.Now()
	ms := opts.AbandonedFor.Milliseconds()
	var n int64
	err := s.timedStatement(ctx, opts.StatementTimeout, func(ctx context.Context, q *dbsqlc.Queries) (err error) {
		n, err = q.CountAbandoned(ctx, ms)
		return err
	})
	if err != nil {
		return SweepResult{}, fmt.Errorf("pgstore: sweep: count abandoned attempts: %w", err)
	}
	var rows []dbsqlc.ListAbandonedRow
	if n > 0 {
		params := dbsqlc.ListAbandonedParams{AbandonedForMs: ms, MaxRows: int32(min(n, maxListed))}
		err = s.timedStatement(ctx, opts.StatementTimeout, func(ctx context.Context, q *dbsqlc.Queries) (err error) {
			rows, err = q.ListAbandoned(ctx, params)
			return err
		})
		if err != nil {
			return SweepResult{}, fmt.Errorf("pgstore: sweep: list abandoned attempts: %w", err)
		}
	}
	for _, r := range rows {
		opts.Logger.LogAttrs(ctx, slog.LevelWarn, "idem: abandoned attempt",
			slog.String("operation", r.Operation),
			slog.String("scope", r.Scope),
			slog.String("key", r.Key),
			slog.String("recovery_point", r.RecoveryPoint),
			slog.Int("attempt", int(r.Attempt)),
			slog.Time("lease_ended", r.LeaseEnded.Time))
	}
	opts.Logger.LogAttrs(ctx, quietIfNone(int(n)), "idem: found abandoned attempts",
		slog.Int64("abandoned", n),
		slog.Int("logged", len(rows)),
		slog.Duration("abandoned_for", opts.AbandonedFor),
		slog.Bool("dry_run", opts.DryRun),
		slog.Duration("took", time.Since(start)))
	return SweepResult{Abandoned: int(n)}, nil
}

// Reap deletes completed keys whose TTL has passed, in batches, oldest
// first; with DryRun it only counts them. The row of a key whose attempts
// derived a key (Attempt.DerivedKey) is emptied instead: it keeps only the
// key and its generation, so that the key's next use counts the next
// generation and never repeats a derived key; once it has been emptied
// for EmptiedFor, it is deleted. In-flight rows are never deleted, even
// past their TTL: a sweep with Fail completes abandoned ones, and a later
// Reap deletes them.
//
// Rows another transaction holds, such as a claim replacing an expired
// key, are skipped rather than waited for, so reapers on several
// instances share the work. When ctx ends between batches, or a statement
// runs past StatementTimeout, Reap returns what it did so far with the
// error.
func (s *Store) Reap(ctx context.Context, opts ReapOptions) (ReapResult, error) {
	return s.reap(ctx, opts, nil)
}

// reap is Reap, calling pause, when not nil, between two batches.
func (s *Store) reap(ctx context.Context, opts ReapOptions, pause func(context.Context)) (ReapResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return ReapResult{}, fmt.Errorf("pgstore: reap: %w", err)
	}
	start := time.Now()
	emptiedFor, keepEmptied := opts.EmptiedFor.Milliseconds(), opts.EmptiedFor < 0
	if opts.DryRun {
		var n, emptied int64
		err := s.timedStatement(ctx, opts.StatementTimeout, func(ctx context.Context, q *dbsqlc.Queries) (err error) {
			if n, err = q.CountExpired(ctx); err != nil || keepEmptied {
				return err
			}
			emptied, err = q.CountEmptied(ctx, emptiedFor)
			return err
		})
		if err != nil {
			return ReapResult{}, fmt.Errorf("pgstore: reap: count expired keys: %w", err)
		}
		opts.Logger.LogAttrs(ctx, quietIfNone(int(n+emptied)), "idem: found expired keys",
			slog.Int64("expired", n),
			slog.Int64("emptied_past_horizon", emptied),
			slog.Bool("dry_run", true),
			slog.Duration("took", time.Since(start)))
		return ReapResult{Deleted: int(n), DeletedEmptied: int(emptied)}, nil
	}
	var res ReapResult
	// Expired keys first, then the rows emptied long enough, each in
	// batches until a batch comes back short.
	for emptying := true; ; {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("pgstore: reap: %w", err)
		}
		var n int64
		err := s.timedStatement(ctx, opts.StatementTimeout, func(ctx context.Context, q *dbsqlc.Queries) error {
			if emptying {
				row, err := q.ReapExpired(ctx, int32(opts.BatchSize))
				res.Deleted += int(row.Deleted)
				res.Emptied += int(row.Emptied)
				n = row.Deleted + row.Emptied
				return err
			}
			var err error
			n, err = q.DeleteEmptied(ctx, dbsqlc.DeleteEmptiedParams{EmptiedForMs: emptiedFor, BatchSize: int32(opts.BatchSize)})
			res.DeletedEmptied += int(n)
			return err
		})
		if err != nil {
			what := "delete expired keys"
			if !emptying {
				what = "delete emptied rows"
			}
			return res, fmt.Errorf("pgstore: reap: %s: %w", what, err)
		}
		if n > 0 {
			res.Batches++
		}
		if n < int64(opts.BatchSize) {
			if !emptying || keepEmptied {
				break
			}
			emptying = false
			continue
		}
		if pause != nil {
			pause(ctx)
		}
	}
	opts.Logger.LogAttrs(ctx, quietIfNone(res.Deleted+res.Emptied+res.DeletedEmptied), "idem: reaped expired keys",
		slog.Int("deleted", res.Deleted),
		slog.Int("emptied", res.Emptied),
		slog.Int("deleted_emptied", res.DeletedEmptied),
		slog.Int("batches", res.Batches),
		slog.Duration("took", time.Since(start)))
	return res, nil
}

// quietIfNone keeps a janitor that finds nothing, run every minute on
// every instance, out of the Info log.
func quietIfNone(n int) slog.Level {
	if n == 0 {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// JanitorOptions configure a Janitor; the zero value sweeps (report only)
// and reaps every minute.
type JanitorOptions struct {
	// Interval is the time between runs; zero means one minute.
	Interval time.Duration
	// Jitter spreads runs apart: each run waits a random time in
	// [0, Jitter) before its first statement, and a random pause in
	// [0, Jitter/10) between two batches, leaving requests room on a
	// busy table. Zero means a tenth of Interval, at most 5s; negative
	// means none. It may not exceed Interval.
	Jitter time.Duration
	// StatementTimeout bounds each statement of a run, for Sweep and Reap
	// when theirs is zero (see SweepOptions.StatementTimeout); zero means
	// 30s, negative means no bound. A run whose statement times out logs
	// the error and the next run tries again.
	StatementTimeout time.Duration
	Sweep            SweepOptions
	Reap             ReapOptions
	// OnRun, when set, is called with what each run did once it ends,
	// failed runs included; never for two runs at once. The next run
	// waits for it to return.
	OnRun func(JanitorRun)
	// Tracer, when it is an idem.MaintenanceTracer, is told of each run
	// too, before OnRun: pass the Tracer of the idem.Options to see the
	// janitor beside the requests.
	Tracer idem.Tracer
	// Logger receives failed runs, and what Sweep and Reap did when their
	// own Logger is nil; nil uses slog.Default().
	Logger *slog.Logger
}

// JanitorRun is what one run of a Janitor did.
type JanitorRun struct {
	// Started is when the run began, after its Delay.
	Started time.Time
	// Took is the run's time from Started, its Pauses included.
	Took time.Duration
	// Delay is the random wait before the run, and Pauses the sum of its
	// random pauses between batches (see JanitorOptions.Jitter).
	Delay, Pauses time.Duration
	Sweep         SweepResult
	Reap          ReapResult
	// Err joins the errors of the sweep and the reap; nil when both did
	// their work. A run cut short by the end of Run's context has that
	// context's error.
	Err error
}

// Janitor keeps the key table healthy: it runs Sweep and Reap every
// Interval until its context ends. Run one on every instance of a server,
// without electing a leader: what makes many janitors safe together is
// FOR UPDATE SKIP LOCKED in their statements. Each row is failed or
// reaped by one instance's statement, and the others skip it rather than
// wait for it, so they share the work and never do it twice. Jitter
// spreads the instances' runs apart, so that instances started together,
// as by a deploy, do not all fire at once every Interval.
type Janitor struct {
	store  *Store
	opts   JanitorOptions
	tracer idem.MaintenanceTracer // opts.Tracer's, or nil
}

// NewJanitor returns a janitor of store's table; Run starts it.
func NewJanitor(store *Store, opts JanitorOptions) *Janitor {
	if opts.Interval == 0 {
		opts.Interval = defaultInterval
	}
	if opts.Jitter == 0 {
		opts.Jitter = min(opts.Interval/10, maxDefaultJitter)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Sweep.Logger == nil {
		opts.Sweep.Logger = opts.Logger
	}
	if opts.Reap.Logger == nil {
		opts.Reap.Logger = opts.Logger
	}
	if opts.Sweep.StatementTimeout == 0 {
		opts.Sweep.StatementTimeout = opts.StatementTimeout
	}
	if opts.Reap.StatementTimeout == 0 {
		opts.Reap.StatementTimeout = opts.StatementTimeout
	}
	j := &Janitor{store: store, opts: opts}
	j.tracer, _ = opts.Tracer.(idem.MaintenanceTracer)
	return j
}

// Run sweeps and reaps at once and then every Interval, each run after
// its random Delay, until ctx is done; it returns nil then. A failing run
// is logged and retried at the next tick, never fatal. Invalid options,
// such as a negative Interval, are the only error Run returns, at once.
func (j *Janitor) Run(ctx context.Context) error {
	if err := j.check(); err != nil {
		return fmt.Errorf("pgstore: janitor: %w", err)
	}
	tick := time.NewTicker(j.opts.Interval)
	defer tick.Stop()
	// Checked before each run: select picks a tick as readily as the end.
	for ctx.Err() == nil {
		j.runOnce(ctx)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return nil
}

func (j *Janitor) check() error {
	if j.opts.Interval < 0 {
		return fmt.Errorf("negative Interval %v", j.opts.Interval)
	}
	if j.opts.Jitter > j.opts.Interval {
		return fmt.Errorf("invalid Jitter %v: longer than Interval %v", j.opts.Jitter, j.opts.Interval)
	}
	_, sweepErr := j.opts.Sweep.withDefaults()
	_, reapErr := j.opts.Reap.withDefaults()
	return errors.Join(sweepErr, reapErr)
}

// runOnce waits its random delay, then sweeps, then reaps, so that
// attempts failed past their TTL go in the same run. A failure of one does
// not skip the other. A run whose context ends during the delay has not
// begun, and is not reported.
func (j *Janitor) runOnce(ctx context.Context) {
	run := JanitorRun{Delay: randomUpTo(j.opts.Jitter)}
	if sleepCtx(ctx, run.Delay) != nil {
		return
	}
	run.Started = time.Now()
	pause := func(ctx context.Context) {
		d := randomUpTo(j.opts.Jitter / 10)
		run.Pauses += d
		_ = sleepCtx(ctx, d) // the batch loop sees ctx's end
	}

	var sweepErr, reapErr error
	run.Sweep, sweepErr = j.store.sweep(ctx, j.opts.Sweep, pause)
	if sweepErr != nil && ctx.Err() == nil {
		j.opts.Logger.ErrorContext(ctx, "idem: janitor: sweep failed; retrying at the next run", "error", sweepErr, "interval", j.opts.Interval)
	}
	if err := ctx.Err(); err != nil {
		reapErr = fmt.Errorf("pgstore: janitor: reap not run: %w", err)
	} else {
		run.Reap, reapErr = j.store.reap(ctx, j.opts.Reap, pause)
		if reapErr != nil && ctx.Err() == nil {
			j.opts.Logger.ErrorContext(ctx, "idem: janitor: reap failed; retrying at the next run", "error", reapErr, "interval", j.opts.Interval)
		}
	}
	run.Took = time.Since(run.Started)
	run.Err = errors.Join(sweepErr, reapErr)
	j.report(ctx, run)
}

// report tells the tracer and OnRun what a run did.
func (j *Janitor) report(ctx context.Context, run JanitorRun) {
	if j.tracer != nil {
		// Told even of a run cut short by the end of ctx.
		j.tracer.TraceMaintenance(context.WithoutCancel(ctx), idem.TraceMaintenanceData{
			Abandoned:      run.Sweep.Abandoned,
			Failed:         run.Sweep.Failed,
			Deleted:        run.Reap.Deleted,
			Emptied:        run.Reap.Emptied,
			DeletedEmptied: run.Reap.DeletedEmptied,
			Duration:       run.Took,
			Err:            run.Err,
		})
	}
	if j.opts.OnRun != nil {
		j.opts.OnRun(run)
	}
}

// randomUpTo returns a random duration in [0, d), or 0 when d <= 0.
func randomUpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// sleepCtx waits for d, or until ctx ends: then it returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
