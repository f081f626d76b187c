package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"time"
)

// PhaseFunc runs the phase of a phased operation that starts at
// at.RecoveryPoint(), inside the phase's transaction. It returns the next
// recovery point to commit with the phase's writes, or the writer of the
// final response; the generated code dispatches to the user's phase
// methods.
type PhaseFunc[T any] func(ctx context.Context, at *Attempt[T]) (next string, w Writer, err error)

// ServePhased answers one request of a phased operation op, whose
// RecoveryPoints are set. The key is claimed with a lease that commits
// before the first phase runs, so that others see it busy; each phase then
// runs in a transaction of its own that commits its writes together with
// the next recovery point, and the last one stores the response. A retry
// that finds the lease passed (its process died) takes over and resumes at
// the first unfinished phase. A Go error or panic in a phase rolls back that
// phase, releases the lease for a retry to take over, and is returned.
func (e *Engine[T]) ServePhased(ctx context.Context, op *Operation, fingerprint []byte, run PhaseFunc[T]) (*Response, error) {
	return e.ServePhasedRequest(ctx, op, fingerprint, nil, run)
}

// ServePhasedRequest is ServePhased for an operation whose abandoned
// attempts a Completer finishes (op.Abandoned is AbandonedComplete):
// request, the request as the handler received it, is kept as JSON with
// the lease, for the completer to resume with (up to MaxStoredRequest
// bytes). It is encoded only when the key is claimed, never for a replay.
func (e *Engine[T]) ServePhasedRequest(ctx context.Context, op *Operation, fingerprint []byte, request any, run PhaseFunc[T]) (*Response, error) {
	ctx, o := e.begin(ctx, TraceRequestStartData{Operation: op.Name, Phased: true})
	resp, err := e.servePhased(ctx, op, fingerprint, request, run)
	e.end(ctx, op, o, resp, err)
	return resp, err
}

func (e *Engine[T]) servePhased(ctx context.Context, op *Operation, fingerprint []byte, request any, run PhaseFunc[T]) (*Response, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	if len(op.RecoveryPoints) == 0 {
		return nil, fmt.Errorf("%w %s: RecoveryPoints is empty; a phased operation needs at least one", ErrInvalidOperation, op.Name)
	}
	id, resp, err := e.identify(ctx, op)
	if resp != nil || err != nil {
		return resp, err
	}
	// Read before the claim, as Serve does.
	secret, err := e.derivationSecret(ctx)
	if err != nil {
		return e.storeFailed(ctx, "secret", err), nil
	}
	if id.Key == "" {
		return e.runKeyless(ctx, op, &Attempt[T]{id: id, secret: secret, nonce: nonce()}, run)
	}
	read := func() (Record, outcome, error) {
		step := e.startStep(ctx, op, StepLookup, "")
		if rec, ok := e.filtered(ctx, id, fingerprint); ok {
			e.endLookup(ctx, step, nil)
			return rec, outcome{}, nil
		}
		rec, err := e.lookup(ctx, id)
		e.endLookup(ctx, step, err)
		return rec, outcome{}, err
	}
	return e.decideAndClaim(ctx, op, id, fingerprint, read, func(rec Record, c Claim) (outcome, error) {
		if request != nil && op.Abandoned == AbandonedComplete {
			c.Request = e.storedRequest(ctx, op, request)
		}
		step := e.startStep(ctx, op, StepClaim, rec.RecoveryPoint)
		var lease Lease[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			lease, err = e.store.Lease(ctx, id, c)
			return err
		})
		e.endLookup(ctx, step, err)
		if err != nil {
			return outcome{}, err
		}
		observed(ctx).claimed(c)
		at := &Attempt[T]{id: id, secret: secret, generation: c.Generation, point: lease.RecoveryPoint(), perRequest: c.PerRequest, fingerprint: c.Fingerprint}
		return ran(e.runPhases(ctx, op, lease, at, run)), nil
	})
}

// PhaseError is the error of a phased operation's phase: a Go error or a
// panic, after which the phases before it stay committed. The 500 answer
// says so, and that a retry with the same key resumes there.
type PhaseError struct {
	Operation string
	// Point is the last recovery point committed: "" when no phase
	// committed.
	Point string
	Err   error
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("idem: %s failed in its %s phase: %v", e.Operation, phaseName(e.Point), e.Err)
}

func (e *PhaseError) Unwrap() error { return e.Err }

// runPhases runs the phases from at's recovery point to the response.
func (e *Engine[T]) runPhases(ctx context.Context, op *Operation, lease Lease[T], at *Attempt[T], run PhaseFunc[T]) (*Response, error) {
	release := func() {
		endCtx, cancel := e.releaseContext(ctx)
		defer cancel()
		// A store that cannot be reached is the request's own record's
		// to report; the lease passes by itself.
		if err := lease.Release(endCtx); err != nil && !errors.Is(err, ErrStoreUnavailable) {
			e.log.ErrorContext(ctx, "idem: release lease", "operation", op.Name, "recovery_point", at.point, "error", err)
		}
	}
	o := observed(ctx)
	for {
		o.point = at.point
		if err := checkPoint(op, at.point); err != nil {
			release()
			return nil, err
		}
		at.started = time.Now()
		step := e.startStep(ctx, op, StepAttempt, at.point)
		var ph Phase[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			ph, err = lease.Phase(ctx)
			return err
		})
		if err != nil {
			e.endStep(step, err)
			o.held += time.Since(at.started)
		}
		if errors.Is(err, ErrLeaseLost) {
			return nil, e.leaseLost(ctx, at)
		}
		if err != nil {
			// The lease stays: once it passes, a retry takes over.
			return e.storeFailed(ctx, "begin phase", err), nil
		}
		at.tx = ph.Tx()
		next, resp, err := e.runPhase(step.ctx, op, ph, at, run)
		e.endStep(step, err)
		if err != nil {
			o.held += time.Since(at.started)
			release()
			switch {
			case ctx.Err() != nil:
				return e.clientGone(ctx, "phase", err), nil
			case errors.As(err, new(*overrunError)):
				return e.overran(ctx, op, at, "phase", err), nil
			case errors.Is(err, ErrStoreUnavailable), errors.Is(err, ErrLeaseOverrun):
				// The phase's connection was lost and the phase rolled
				// back; if the release failed too, the lease lets a retry
				// take over once it passes.
				return e.attemptFailed(ctx, op, at, "phase", err), nil
			}
			return nil, &PhaseError{Operation: op.Name, Point: at.point, Err: err}
		}
		phaseEnd, cancelPhase := e.endContext(ctx, op, at)
		step = e.startStep(ctx, op, StepCommit, at.point)
		if resp != nil {
			err := ph.Complete(phaseEnd, resp)
			cancelPhase()
			e.endStep(step, err)
			o.held += time.Since(at.started)
			switch {
			case errors.Is(err, ErrLeaseLost):
				return nil, e.leaseLost(ctx, at)
			case err != nil:
				return e.attemptFailed(ctx, op, at, "complete", err), nil
			}
			o.ran = true
			return resp, nil
		}
		err = ph.Advance(phaseEnd, next)
		cancelPhase()
		e.endStep(step, err)
		o.held += time.Since(at.started)
		switch {
		case errors.Is(err, ErrLeaseLost):
			return nil, e.leaseLost(ctx, at)
		case err != nil:
			return e.attemptFailed(ctx, op, at, "advance", err), nil
		}
		at.point = next
	}
}

// runPhase runs one phase and captures its response, if it gave one. On a
// Go error, a panic or a bad step it rolls the phase back and returns the
// error; when the phase's own connection was lost, the error matches
// ErrStoreUnavailable.
//
// A phase that failed after its context ended StoreTimeout past the lease
// returns an *overrunError.
func (e *Engine[T]) runPhase(ctx context.Context, op *Operation, ph Txn[T], at *Attempt[T], run PhaseFunc[T]) (next string, resp *Response, err error) {
	pctx, cancelPhase := e.attemptContext(ctx, op, at)
	next, resp, err = callPhase(pctx, op, at, run)
	overran := err != nil && pctx.Err() != nil && ctx.Err() == nil
	cancelPhase()
	if err == nil {
		return next, resp, nil
	}
	if overran {
		err = &overrunError{err}
	}
	abortCtx, cancel := e.endContext(ctx, op, at)
	defer cancel()
	abortErr := ph.Abort(abortCtx)
	if pe := (*PanicError)(nil); errors.As(err, &pe) && pe.Value == http.ErrAbortHandler {
		panic(http.ErrAbortHandler)
	}
	switch {
	case errors.Is(abortErr, ErrStoreUnavailable), errors.Is(abortErr, ErrLeaseOverrun):
		return "", nil, fmt.Errorf("%w (the phase failed with: %w)", abortErr, err)
	case abortErr != nil:
		e.log.ErrorContext(ctx, "idem: roll back phase", "operation", op.Name, "recovery_point", at.point, "error", abortErr)
	}
	return "", nil, err
}

// callPhase runs one phase, turning a panic into a *PanicError, and checks
// the step it returns.
func callPhase[T any](ctx context.Context, op *Operation, at *Attempt[T], run PhaseFunc[T]) (next string, resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			next, resp, err = "", nil, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	next, write, err := run(ctx, at)
	switch {
	case err != nil:
		return "", nil, err
	case write != nil:
		resp, err := Capture(write)
		if err != nil {
			return "", nil, fmt.Errorf("idem: write %s response: %w", op.Name, err)
		}
		return "", resp, nil
	case next == "":
		return "", nil, fmt.Errorf("idem: the %s phase of %s returned neither a recovery point nor a response", phaseName(at.point), op.Name)
	case !after(op, at.point, next):
		return "", nil, fmt.Errorf("idem: the %s phase of %s returned recovery point %q; expected one of the points after it, %q", phaseName(at.point), op.Name, next, pointsAfter(op, at.point))
	}
	return next, nil, nil
}

// runKeyless runs every phase for a request without a key: each commits
// on its own, with nothing to resume from.
func (e *Engine[T]) runKeyless(ctx context.Context, op *Operation, at *Attempt[T], run PhaseFunc[T]) (*Response, error) {
	o := observed(ctx)
	for {
		var txn Txn[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			txn, err = e.store.Begin(ctx)
			return err
		})
		if err != nil {
			return e.storeFailed(ctx, "begin", err), nil
		}
		at.tx = txn.Tx()
		at.started = time.Now()
		step := e.startStep(ctx, op, StepAttempt, at.point)
		next, resp, err := e.runPhase(step.ctx, op, txn, at, run)
		e.endStep(step, err)
		o.held += time.Since(at.started)
		switch {
		case err != nil && ctx.Err() != nil:
			return e.clientGone(ctx, "handler", err), nil
		case errors.As(err, new(*overrunError)):
			return e.overran(ctx, op, at, "handler", err), nil
		case errors.Is(err, ErrStoreUnavailable):
			return e.attemptFailed(ctx, op, at, "handler", err), nil
		case err != nil:
			return nil, err
		}
		endCtx, cancel := e.endContext(ctx, op, at)
		err = txn.Complete(endCtx, resp)
		cancel()
		if err != nil {
			return e.attemptFailed(ctx, op, at, "complete", err), nil
		}
		if resp != nil {
			o.ran = true
			return resp, nil
		}
		at.point = next
		o.point = next
	}
}

// checkPoint refuses a stored recovery point the operation does not have,
// such as one renamed since the attempt began.
func checkPoint(op *Operation, point string) error {
	if point == "" || slices.Contains(op.RecoveryPoints, point) {
		return nil
	}
	return fmt.Errorf("idem: %s's key is at recovery point %q, which the operation no longer has (its points are %q); keep a renamed point's old name until its keys have expired", op.Name, point, op.RecoveryPoints)
}

// after reports whether next is a recovery point later than point.
func after(op *Operation, point, next string) bool {
	return slices.Contains(pointsAfter(op, point), next)
}

func pointsAfter(op *Operation, point string) []string {
	if point == "" {
		return op.RecoveryPoints
	}
	return op.RecoveryPoints[slices.Index(op.RecoveryPoints, point)+1:]
}

func phaseName(point string) string {
	if point == "" {
		return "first"
	}
	return fmt.Sprintf("%q", point)
}

// errLeaseLost makes ServePhased decide again after its attempt lost the
// key.
var errLeaseLost = errors.New("idem: lease lost")

// leaseLost notes that an attempt lost its key, because its lease passed
// and another attempt took over or the sweeper failed it, and returns
// errLeaseLost: what to answer is decided again from what the key holds
// now, so that the answer is that attempt's, or the sweeper's.
func (e *Engine[T]) leaseLost(ctx context.Context, at *Attempt[T]) error {
	observed(ctx).leaseLost++
	return errLeaseLost
}

// overrunError is the error of a phase that failed after its context
// ended, StoreTimeout past its lease.
type overrunError struct{ err error }

func (e *overrunError) Error() string { return e.err.Error() }
func (e *overrunError) Unwrap() error { return e.err }
