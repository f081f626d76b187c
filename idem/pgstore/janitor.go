package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore/internal/dbsqlc"
	"github.com/jackc/pgx/v5/pgtype"
)

const (
	defaultAbandonedFor = time.Hour
	defaultSweepBatch   = 500
	defaultReapBatch    = 1000
	defaultInterval     = time.Minute

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

// ReapOptions configure Store.Reap; the zero value works.
type ReapOptions struct {
	// BatchSize bounds the rows one statement deletes; zero means 1000.
	BatchSize int
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
// Sweep returns what it did so far with the context's error.
func (s *Store) Sweep(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return SweepResult{}, fmt.Errorf("pgstore: sweep: %w", err)
	}
	if opts.Fail && !opts.DryRun {
		return s.failAbandoned(ctx, opts)
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

// abandonedProblem is the response a sweep with Fail stores for each
// abandoned attempt, and so what every later retry of its key receives.
func abandonedProblem() *idem.Problem {
	return &idem.Problem{
		Type:   idem.TypeAttemptAbandoned,
		Title:  "Attempt abandoned",
		Status: 500,
		Detail: "This request stopped partway through and was not retried with this Idempotency-Key " +
			"in time to resume it, so it will not be resumed. What it did before it stopped remains in effect. " +
			"Check the current state of the resource, then, if still needed, send a new request with a new Idempotency-Key.",
	}
}

func (s *Store) failAbandoned(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	start := time.Now()
	resp := idem.Render(opts.Problems, abandonedProblem())
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
		rows, err := s.q.FailAbandoned(ctx, params)
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
	n, err := s.q.CountAbandoned(ctx, ms)
	if err != nil {
		return SweepResult{}, fmt.Errorf("pgstore: sweep: count abandoned attempts: %w", err)
	}
	var rows []dbsqlc.ListAbandonedRow
	if n > 0 {
		rows, err = s.q.ListAbandoned(ctx, dbsqlc.ListAbandonedParams{AbandonedForMs: ms, MaxRows: int32(min(n, maxListed))})
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
// generation and never repeats a derived key. In-flight rows are never
// deleted, even past their TTL: a sweep with Fail completes abandoned
// ones, and a later Reap deletes them.
//
// Rows another transaction holds, such as a claim replacing an expired
// key, are skipped rather than waited for, so reapers on several
// instances share the work. When ctx ends between batches, Reap returns
// what it did so far with the context's error.
func (s *Store) Reap(ctx context.Context, opts ReapOptions) (ReapResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return ReapResult{}, fmt.Errorf("pgstore: reap: %w", err)
	}
	start := time.Now()
	if opts.DryRun {
		n, err := s.q.CountExpired(ctx)
		if err != nil {
			return ReapResult{}, fmt.Errorf("pgstore: reap: count expired keys: %w", err)
		}
		opts.Logger.LogAttrs(ctx, quietIfNone(int(n)), "idem: found expired keys",
			slog.Int64("expired", n),
			slog.Bool("dry_run", true),
			slog.Duration("took", time.Since(start)))
		return ReapResult{Deleted: int(n)}, nil
	}
	var res ReapResult
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("pgstore: reap: %w", err)
		}
		row, err := s.q.ReapExpired(ctx, int32(opts.BatchSize))
		if err != nil {
			return res, fmt.Errorf("pgstore: reap: delete expired keys: %w", err)
		}
		n := row.Deleted + row.Emptied
		if n > 0 {
			res.Batches++
			res.Deleted += int(row.Deleted)
			res.Emptied += int(row.Emptied)
		}
		if n < int64(opts.BatchSize) {
			break
		}
	}
	opts.Logger.LogAttrs(ctx, quietIfNone(res.Deleted+res.Emptied), "idem: reaped expired keys",
		slog.Int("deleted", res.Deleted),
		slog.Int("emptied", res.Emptied),
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
	Sweep    SweepOptions
	Reap     ReapOptions
	// Logger receives failed runs, and what Sweep and Reap did when their
	// own Logger is nil; nil uses slog.Default().
	Logger *slog.Logger
}

// Janitor keeps the key table healthy: it runs Sweep and Reap every
// Interval until its context ends. Run one per server; several at once
// share the work safely.
type Janitor struct {
	store *Store
	opts  JanitorOptions
}

// NewJanitor returns a janitor of store's table; Run starts it.
func NewJanitor(store *Store, opts JanitorOptions) *Janitor {
	if opts.Interval == 0 {
		opts.Interval = defaultInterval
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
	return &Janitor{store: store, opts: opts}
}

// Run sweeps and reaps at once and then every Interval, until ctx is done;
// it returns nil then. A failing run is logged and retried at the next
// tick, never fatal. Invalid options, such as a negative Interval, are
// the only error Run returns, at once.
func (j *Janitor) Run(ctx context.Context) error {
	if err := j.check(); err != nil {
		return fmt.Errorf("pgstore: janitor: %w", err)
	}
	tick := time.NewTicker(j.opts.Interval)
	defer tick.Stop()
	for {
		j.runOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (j *Janitor) check() error {
	if j.opts.Interval < 0 {
		return fmt.Errorf("negative Interval %v", j.opts.Interval)
	}
	_, sweepErr := j.opts.Sweep.withDefaults()
	_, reapErr := j.opts.Reap.withDefaults()
	return errors.Join(sweepErr, reapErr)
}

// runOnce sweeps, then reaps, so that attempts failed past their TTL go
// in the same run. A failure of one does not skip the other.
func (j *Janitor) runOnce(ctx context.Context) {
	if _, err := j.store.Sweep(ctx, j.opts.Sweep); err != nil && ctx.Err() == nil {
		j.opts.Logger.ErrorContext(ctx, "idem: janitor: sweep failed; retrying at the next run", "error", err, "interval", j.opts.Interval)
	}
	if ctx.Err() != nil {
		return
	}
	if _, err := j.store.Reap(ctx, j.opts.Reap); err != nil && ctx.Err() == nil {
		j.opts.Logger.ErrorContext(ctx, "idem: janitor: reap failed; retrying at the next run", "error", err, "interval", j.opts.Interval)
	}
}
