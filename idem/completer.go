package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// Abandoned is what a Completer does with a phased attempt its client
// abandoned: the annotation's abandoned.
type Abandoned string

const (
	// AbandonedComplete resumes the attempt at its recovery point, with
	// the request stored with its lease, and stores its final response,
	// which the client's eventual retry replays.
	AbandonedComplete Abandoned = "complete"
	// AbandonedFail stores the attempt-abandoned problem as its response.
	AbandonedFail Abandoned = "fail"
)

// MaxStoredRequest bounds the request a lease keeps for the Completer, in
// bytes of JSON. A larger one is not kept: its attempt is left for a retry
// to take over, and the sweeper reports it.
const MaxStoredRequest = 256 << 10

// AbandonedProblem is the answer stored for an attempt abandoned partway:
// what `idemgen sweep -fail`, and a Completer for an operation annotated
// abandoned: fail, store, and so what every later retry of its key gets.
func AbandonedProblem() *Problem {
	return &Problem{
		Type:   TypeAttemptAbandoned,
		Title:  "Attempt abandoned",
		Status: http.StatusInternalServerError,
		Detail: "This request stopped partway through and was not retried with this Idempotency-Key " +
			"in time to resume it, so it will not be resumed. What it did before it stopped remains in effect. " +
			"Check the current state of the resource, then, if still needed, send a new request with a new Idempotency-Key.",
	}
}

// AbandonedAttempt is a phased attempt whose lease passed long ago, as a
// store lists them for the Completer.
type AbandonedAttempt struct {
	ID            ID
	Fingerprint   []byte
	Request       []byte // nil when none was kept
	RecoveryPoint string
	Attempt       int64
	Generation    int64
	PerRequest    bool // see Record.PerRequest
}

// AbandonedFinder is a Store that lists abandoned attempts for the
// Completer: in-flight rows of the operations named, whose lease passed at
// least their After ago, oldest first, at most limit of them.
type AbandonedFinder interface {
	FindAbandoned(ctx context.Context, ops []AbandonedAfter, limit int) ([]AbandonedAttempt, error)
}

// AbandonedAfter names an operation and how long after its lease passed
// its attempts count as abandoned. With NeedsRequest, only attempts that
// kept their request are listed: the others cannot be resumed.
type AbandonedAfter struct {
	Operation    string
	After        time.Duration
	NeedsRequest bool
}

// Completable is an operation a Completer drives to the end: Operation,
// whose Abandoned is set, and, for AbandonedComplete, how to rebuild its
// phases from the request stored with the lease. The generated
// NewIdempotentCompleter lists them.
type Completable[T any] struct {
	Operation *Operation
	Phases    func(ctx context.Context, request []byte) (PhaseFunc[T], error)
}

// CompleterOptions configure a Completer; the zero value works.
type CompleterOptions struct {
	// Interval is the time between runs; zero means one minute.
	Interval time.Duration
	// Jitter bounds a random delay before each run, so that instances
	// started together do not run together; zero means a tenth of
	// Interval, at most 5s; negative, none.
	Jitter time.Duration
	// BatchSize bounds the attempts one run takes on; zero means 100.
	BatchSize int
	// CompleteAfter, when set, replaces every operation's CompleteAfter
	// (the annotation's complete-after).
	CompleteAfter time.Duration
	// OnRun, when set, is called with each run's results.
	OnRun func(CompleterRun)
}

// CompleterRun is what one run of a Completer did.
type CompleterRun struct {
	Started time.Time
	Took    time.Duration
	// Found counts the abandoned attempts listed; Completed those driven
	// to their response, Failed those given the attempt-abandoned answer,
	// Errored those whose phase failed (they stay for a later run), and
	// Skipped those another instance or a retry took first, or that had
	// no request kept.
	Found, Completed, Failed, Errored, Skipped int
	// Err is what failed the run itself, such as the listing.
	Err error
}

// Completer drives the phased attempts that clients abandoned to a
// terminal state, inside the service, since it runs the service's own
// phase methods. Each attempt is taken over under the same lease rules as
// a client's retry: the claim succeeds only on the row as listed and past
// its lease, so with many instances running a Completer each attempt is
// completed once, and a client's retry racing it gets a 409 and then the
// stored answer.
type Completer[T any] struct {
	engine *Engine[T]
	ops    map[string]Completable[T]
	after  []AbandonedAfter
	opts   CompleterOptions
}

// NewCompleter returns a completer of ops on engine's store, which must be
// an AbandonedFinder (the Postgres store is).
func NewCompleter[T any](engine *Engine[T], ops []Completable[T], opts CompleterOptions) *Completer[T] {
	c := &Completer[T]{engine: engine, ops: make(map[string]Completable[T]), opts: opts}
	for _, o := range ops {
		after := o.Operation.CompleteAfter
		if opts.CompleteAfter > 0 {
			after = opts.CompleteAfter
		}
		if after <= 0 {
			after = time.Hour
		}
		c.ops[o.Operation.Name] = o
		c.after = append(c.after, AbandonedAfter{Operation: o.Operation.Name, After: after, NeedsRequest: o.Operation.Abandoned == AbandonedComplete})
	}
	if c.opts.Interval <= 0 {
		c.opts.Interval = time.Minute
	}
	if c.opts.Jitter == 0 {
		c.opts.Jitter = min(c.opts.Interval/10, 5*time.Second)
	}
	if c.opts.BatchSize <= 0 {
		c.opts.BatchSize = 100
	}
	return c
}

// ErrNoFinder reports a store that cannot list abandoned attempts.
var ErrNoFinder = errors.New("idem: the store cannot list abandoned attempts (it reports no FindAbandoned capability)")

// Run runs the completer every Interval, after a random delay, until ctx
// ends; it returns nil then. A failed run is logged and retried at the
// next; only a store that cannot list abandoned attempts is an error, at
// once.
func (c *Completer[T]) Run(ctx context.Context) error {
	if c.engine.caps.finder == nil {
		return ErrNoFinder
	}
	for {
		delay := c.opts.Interval
		if c.opts.Jitter > 0 {
			delay += rand.N(c.opts.Jitter)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		run := c.RunOnce(ctx)
		if run.Err != nil && ctx.Err() == nil {
			c.engine.log.ErrorContext(ctx, "idem: completer: run failed; retrying at the next run", "error", run.Err, "interval", c.opts.Interval)
		}
	}
}

// RunOnce lists the abandoned attempts and drives each to the end.
func (c *Completer[T]) RunOnce(ctx context.Context) CompleterRun {
	run := CompleterRun{Started: time.Now()}
	defer func() {
		run.Took = time.Since(run.Started)
		if mt, ok := c.engine.tracer.(MaintenanceTracer); ok {
			mt.TraceMaintenance(ctx, TraceMaintenanceData{Completer: true, Completed: run.Completed, Failed: run.Failed,
				CompletionFailed: run.Errored, Duration: run.Took, Err: run.Err})
		}
		if run.Found > 0 || run.Err != nil {
			c.engine.log.LogAttrs(ctx, slog.LevelInfo, "idem: completer: finished abandoned attempts",
				slog.Int("found", run.Found), slog.Int("completed", run.Completed), slog.Int("failed", run.Failed),
				slog.Int("errored", run.Errored), slog.Int("skipped", run.Skipped), slog.Duration("took", run.Took))
		}
		if c.opts.OnRun != nil {
			c.opts.OnRun(run)
		}
	}()
	finder := c.engine.caps.finder
	if finder == nil {
		run.Err = ErrNoFinder
		return run
	}
	found, err := finder.FindAbandoned(ctx, c.after, c.opts.BatchSize)
	if err != nil {
		run.Err = fmt.Errorf("idem: completer: list abandoned attempts: %w", err)
		return run
	}
	run.Found = len(found)
	for _, a := range found {
		if ctx.Err() != nil {
			run.Err = ctx.Err()
			return run
		}
		switch c.finish(ctx, a) {
		case finishCompleted:
			run.Completed++
		case finishFailed:
			run.Failed++
		case finishErrored:
			run.Errored++
		default:
			run.Skipped++
		}
	}
	return run
}

type finishResult int

const (
	finishSkipped finishResult = iota
	finishCompleted
	finishFailed
	finishErrored
)

// finish takes over one abandoned attempt and runs it to its response.
func (c *Completer[T]) finish(ctx context.Context, a AbandonedAttempt) finishResult {
	o, ok := c.ops[a.ID.Operation]
	if !ok {
		return finishSkipped
	}
	op := o.Operation
	log := c.engine.log.With("operation", op.Name, "key_hash", KeyHash(a.ID), "recovery_point", a.RecoveryPoint, "generation", a.Generation)
	var run PhaseFunc[T]
	result := finishFailed
	if op.Abandoned == AbandonedComplete && a.Request != nil && o.Phases != nil {
		var err error
		if run, err = o.Phases(ctx, a.Request); err != nil {
			// A request kept by an older build that no longer decodes:
			// left for the sweeper, as one without a request is.
			log.ErrorContext(ctx, "idem: completer: the stored request does not decode; leaving the attempt for a retry or the sweeper", "error", err)
			return finishSkipped
		}
		result = finishCompleted
	} else if op.Abandoned == AbandonedComplete {
		return finishSkipped // no request was kept (the store lists none such)
	} else {
		abandoned := Render(c.engine.problems, AbandonedProblem())
		run = func(context.Context, *Attempt[T]) (string, Writer, error) {
			return "", abandoned.Write, nil
		}
	}
	resp, err := c.engine.resume(ctx, op, a, run, TraceRequestStartData{Operation: op.Name, Phased: true, Completer: true})
	switch {
	case errors.Is(err, ErrContended), errors.Is(err, errLeaseLost):
		log.DebugContext(ctx, "idem: completer: another instance or a retry took the attempt first")
		return finishSkipped
	case err != nil:
		log.WarnContext(ctx, "idem: completer: could not finish the abandoned attempt; a later run tries again", "error", err)
		return finishErrored
	}
	log.InfoContext(ctx, "idem: completer: finished an abandoned attempt", "status", resp.Status, "abandoned", string(op.Abandoned))
	return result
}

// resume takes over abandoned attempt a, under the lease rules of a
// takeover, and runs its phases from its recovery point to the response,
// observed as start says: a Completer's run or a worker's.
// It returns ErrContended or errLeaseLost when another attempt took it
// first, and an error when it did not end with a stored response.
func (e *Engine[T]) resume(ctx context.Context, op *Operation, a AbandonedAttempt, run PhaseFunc[T], start TraceRequestStartData) (*Response, error) {
	ctx, o := e.begin(ctx, start)
	o.id = a.ID
	resp, err := e.resumeAttempt(ctx, op, a, run)
	e.end(ctx, op, o, resp, err)
	if err == nil && !o.ran {
		// Answered without storing a response: a store failure, or the
		// client gone (never, without a client).
		return resp, fmt.Errorf("idem: the attempt ended with %d and stored nothing", resp.Status)
	}
	return resp, err
}

func (e *Engine[T]) resumeAttempt(ctx context.Context, op *Operation, a AbandonedAttempt, run PhaseFunc[T]) (*Response, error) {
	secret, err := e.derivationSecret(ctx)
	if err != nil {
		return nil, err
	}
	c := Claim{Fingerprint: a.Fingerprint, TTL: op.TTL, Lease: op.Lease, Attempt: a.Attempt, Generation: a.Generation, Takeover: true, PerRequest: a.PerRequest}
	step := e.startStep(ctx, op, StepClaim, a.RecoveryPoint)
	lease, err := e.store.Lease(ctx, a.ID, c)
	e.endLookup(ctx, step, err)
	if err != nil {
		return nil, err
	}
	o := observed(ctx)
	o.claimed(c)
	// The first worker of an accepted request runs it first: the accept
	// claimed the key for it. A later one takes over.
	o.takeover = !o.worker || a.Attempt > 1
	at := &Attempt[T]{id: a.ID, secret: secret, generation: c.Generation, point: lease.RecoveryPoint(), perRequest: c.PerRequest, fingerprint: c.Fingerprint}
	return e.runPhases(ctx, op, lease, at, run)
}

// storedRequest is request as a lease keeps it, or nil when it is too
// large to keep or does not encode.
func (e *Engine[T]) storedRequest(ctx context.Context, op *Operation, request any) []byte {
	b, err := json.Marshal(request)
	switch {
	case err != nil:
		e.log.WarnContext(ctx, "idem: the request does not encode as JSON, so the completer cannot finish it if its client abandons it", "operation", op.Name, "error", err)
		return nil
	case len(b) > MaxStoredRequest:
		e.log.WarnContext(ctx, "idem: the request is too large to keep for the completer; if its client abandons it, it is left for a retry", "operation", op.Name, "bytes", len(b), "limit", MaxStoredRequest)
		return nil
	}
	return b
}
