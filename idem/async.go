package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// An async operation (Operation.Async, the annotation's mode: async)
// answers a first request with 202 Accepted once its key is claimed and
// its job enqueued, in one transaction; a worker runs the handler later,
// from the request stored with the key, and stores its response as a
// phased attempt's is stored. Retries of the key while it runs get 202
// again, never 409; its status resource reports how it is doing.

// Accepted names an accepted request of an async operation, as its job
// carries it: the key, and the use of the key (generation) the job runs.
type Accepted struct {
	ID         ID
	Generation int64
}

// Enqueue inserts the job that runs an accepted request, on tx, the
// transaction of the request's claim: neither commits without the other.
// Package idemriver's enqueues a River job with InsertTx.
type Enqueue[T any] func(ctx context.Context, tx T, a Accepted) error

// Accepter is a Store that can accept requests of async operations.
type Accepter[T any] interface {
	// Accept claims a key for an async request: an in-flight row holding
	// c.Request, whose lease has passed already, so that a worker may take
	// it over at once, and calls enqueue on the claim's transaction
	// before committing it. It fails with ErrContended as Claim does.
	Accept(ctx context.Context, id ID, c Claim, enqueue func(ctx context.Context, tx T) error) error
	// AcceptedRequest returns the request an in-flight key keeps, or nil.
	AcceptedRequest(ctx context.Context, id ID) ([]byte, error)
}

// AsyncState is where an async request is, as its status resource says.
type AsyncState string

const (
	// AsyncPending: accepted, and waiting for a worker (a first one, or
	// another after a worker stopped).
	AsyncPending AsyncState = "pending"
	// AsyncRunning: a worker holds the request's lease.
	AsyncRunning AsyncState = "running"
	// AsyncSucceeded: its response is stored, with a status below 400.
	AsyncSucceeded AsyncState = "succeeded"
	// AsyncFailed: its response is stored, with a status of 400 or more:
	// the handler's own error response, or a failure the layer stored.
	AsyncFailed AsyncState = "failed"
)

// AsyncStatus is the body of an async request's status resource, and of
// its 202 answers.
type AsyncStatus struct {
	Status AsyncState `json:"status"`
	// RecoveryPoint is the last recovery point a phased handler
	// committed, while it runs.
	RecoveryPoint string `json:"recovery_point,omitempty"`
	// Response is the stored response, once there is one: the answer a
	// retry of the request with its key replays.
	Response *AsyncResponse `json:"response,omitempty"`
}

// AsyncResponse is a stored response as a status resource shows it.
type AsyncResponse struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	// Body is the body itself when it is JSON, else the body as a string.
	Body json.RawMessage `json:"body,omitempty"`
}

// ServeAsync answers one request of an async operation op: a first
// request is claimed and its job enqueued by enqueue in one transaction,
// and answered 202 Accepted with the status resource's Location and
// Retry-After; a retry while it is pending or running gets the same; once
// done, the stored response is replayed; another request under the key
// gets 422. request is stored with the key, as JSON, for the worker.
// The store must be an Accepter.
func (e *Engine[T]) ServeAsync(ctx context.Context, op *Operation, fingerprint []byte, request any, enqueue Enqueue[T]) (*Response, error) {
	ctx, o := e.begin(ctx, TraceRequestStartData{Operation: op.Name, Phased: len(op.RecoveryPoints) > 0})
	resp, err := e.serveAsync(ctx, op, fingerprint, request, enqueue)
	e.end(ctx, op, o, resp, err)
	return resp, err
}

func (e *Engine[T]) serveAsync(ctx context.Context, op *Operation, fingerprint []byte, request any, enqueue Enqueue[T]) (*Response, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	if !op.Async {
		return nil, fmt.Errorf("%w %s: ServeAsync serves only an operation whose Async is set", ErrInvalidOperation, op.Name)
	}
	acc := e.caps.accepter
	if acc == nil {
		return e.storeFailed(ctx, "accept", fmt.Errorf("%w: the store %T cannot accept requests of async operations such as %s (use the Postgres store, pgstore)", ErrStoreMisconfigured, e.store, op.Name)), nil
	}
	id, resp, err := e.identify(ctx, op)
	if resp != nil || err != nil {
		return resp, err
	}
	var stored []byte
	lc := e.caps.lookupClaimer
	var waits int
	var waited time.Duration
	for tries := 0; tries < maxTries; tries++ {
		step := e.startStep(ctx, op, StepLookup, "")
		rec, ok := e.filtered(ctx, id, fingerprint)
		var txn Txn[T]
		switch {
		case ok:
		case lc != nil:
			// A lookup that claims a free key saves the accept a round
			// trip, as it does an atomic attempt.
			err = e.waitStore(ctx, func(ctx context.Context) (err error) {
				rec, txn, err = lc.LookupClaim(ctx, id, Claim{Fingerprint: fingerprint, TTL: op.TTL, Lease: op.Lease, Generation: 1, PerRequest: e.perRequest})
				return err
			})
		default:
			rec, err = e.lookup(ctx, id)
		}
		e.endLookup(ctx, step, err)
		if err != nil {
			return e.storeFailed(ctx, "lookup", err), nil
		}
		if txn != nil {
			at, ok := txn.(AcceptTxn[T])
			if !ok {
				// A store whose lookup claims but cannot accept on that
				// claim: free the key, and accept with a claim of its own.
				if err := txn.Abort(ctx); err != nil {
					return e.storeFailed(ctx, "accept", err), nil
				}
				lc = nil
				continue
			}
			resp, err := e.acceptClaimed(ctx, op, id, at, fingerprint, request, enqueue)
			if errors.Is(err, ErrContended) {
				continue
			}
			return resp, err
		}
		if rec.Held && !rec.Found && waited < heldWait {
			// A claim whose row is not visible yet: another request's
			// accept, committing in a moment (or, from a build that ran
			// the operation in the request, an atomic attempt). Read again
			// once it has, so that a retry gets its 202 or 422, not 409.
			// 2ms, doubling: an accept commits in a few round trips.
			d := min(heldWait/512<<min(waits, 9), heldWait-waited)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return e.keyInUse(op, e.retryAfter), nil
			case <-t.C:
			}
			waited += d
			waits++
			tries--
			continue
		}
		if rec.Found && !rec.Completed {
			// Pending or running, whatever its lease: the workers run
			// it, never a client's retry.
			if !bytes.Equal(rec.Fingerprint, fingerprint) {
				return e.keyReused(op), nil
			}
			return e.asyncAnswer(ctx, op, id, rec, OutcomeInProgress), nil
		}
		// Otherwise as for every operation: a replay, a 422, a 409 for an
		// atomic attempt (of a build that served the operation before it
		// was async), or a new use of the key.
		c, resp := e.decideRecord(op, rec, fingerprint)
		if resp != nil {
			return resp, nil
		}
		if stored == nil {
			if stored, resp = e.asyncRequest(op, request); resp != nil {
				return resp, nil
			}
		}
		c.Lease, c.Generation, c.Request, c.PerRequest = 0, generation(rec, c), stored, e.perRequest
		step = e.startStep(ctx, op, StepClaim, "")
		err := e.waitStore(ctx, func(ctx context.Context) error {
			return acc.Accept(ctx, id, c, func(ctx context.Context, tx T) error {
				return enqueue(ctx, tx, Accepted{ID: id, Generation: c.Generation})
			})
		})
		e.endLookup(ctx, step, err)
		switch {
		case errors.Is(err, ErrContended):
			continue
		case err != nil:
			return e.acceptFailed(ctx, err), nil
		}
		observed(ctx).claimed(c)
		return e.asyncAnswer(ctx, op, id, Record{Found: true, Attempt: 1}, OutcomeAccepted), nil
	}
	return e.keyInUse(op, e.retryAfter), nil
}

// acceptFailed answers an accept that failed in the store. No handler
// runs in it: a transaction that sat idle past the lease's bound was held
// up by a store that stopped answering, and the client is to retry.
func (e *Engine[T]) acceptFailed(ctx context.Context, err error) *Response {
	if errors.Is(err, ErrLeaseOverrun) {
		err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return e.storeFailed(ctx, "accept", err)
}

// heldWait bounds how long a request of an async operation waits for a
// claim on its key to show its row, before it is answered 409.
const heldWait = time.Second

// acceptClaimed accepts request on the key its lookup claimed, at: the
// job and the key's row in one commit. It returns ErrContended when the
// key is to be read again.
func (e *Engine[T]) acceptClaimed(ctx context.Context, op *Operation, id ID, at AcceptTxn[T], fingerprint []byte, request any, enqueue Enqueue[T]) (*Response, error) {
	stored, resp := e.asyncRequest(op, request)
	if resp != nil {
		if err := at.Abort(ctx); err != nil {
			return e.storeFailed(ctx, "accept", err), nil
		}
		return resp, nil
	}
	c := Claim{Fingerprint: fingerprint, TTL: op.TTL, Generation: 1, Request: stored, PerRequest: e.perRequest}
	step := e.startStep(ctx, op, StepClaim, "")
	err := at.Accept(ctx, c, func(ctx context.Context, tx T) error {
		return enqueue(ctx, tx, Accepted{ID: id, Generation: 1})
	})
	e.endLookup(ctx, step, err)
	switch {
	case errors.Is(err, ErrContended):
		return nil, err
	case err != nil:
		return e.acceptFailed(ctx, err), nil
	}
	observed(ctx).claimed(c)
	return e.asyncAnswer(ctx, op, id, Record{Found: true, Attempt: 1}, OutcomeAccepted), nil
}

// asyncRequest encodes request for the worker, or answers why it cannot
// be kept: a worker can only run a request it can read back.
func (e *Engine[T]) asyncRequest(op *Operation, request any) ([]byte, *Response) {
	b, err := json.Marshal(request)
	switch {
	case err != nil:
		e.log.Error("idem: the request of an async operation does not encode as JSON, so no worker could run it", "operation", op.Name, "error", err)
		return nil, e.render(&Problem{Type: TypeInternal, Title: "Internal error", Status: http.StatusInternalServerError,
			Detail: "The request could not be stored for its worker, so it was not accepted. Nothing ran; retrying will not help."})
	case len(b) > MaxStoredRequest:
		return nil, e.render(&Problem{Type: TypeBodyTooLarge, Title: "Request too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("This operation runs requests later, from a stored copy of at most %d bytes; this one is %d. Nothing was stored: send a smaller request.", MaxStoredRequest, len(b))})
	}
	return b, nil
}

// asyncAnswer is the 202 of a pending or running request of op.
func (e *Engine[T]) asyncAnswer(ctx context.Context, op *Operation, id ID, rec Record, outcome Outcome) *Response {
	st := AsyncStatus{Status: stateOf(rec), RecoveryPoint: rec.RecoveryPoint}
	resp := e.statusResponse(http.StatusAccepted, st)
	if loc := op.StatusLocation(id.Key); loc != "" {
		resp.Header.Set("Location", mountPrefix(RequestFrom(ctx), op.Path)+loc)
	}
	resp.outcome = outcome
	return resp
}

// statusResponse is st as JSON with status, and Retry-After while the
// request runs.
func (e *Engine[T]) statusResponse(status int, st AsyncStatus) *Response {
	body, _ := json.Marshal(st) // plain data: never fails
	h := http.Header{"Content-Type": {"application/json"}}
	if st.Response == nil {
		h.Set("Retry-After", strconv.Itoa(retrySeconds(e.retryAfter)))
	}
	return &Response{Status: status, Header: h, Body: body}
}

func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// stateOf is the state of an in-flight row: running while a worker's
// lease holds it (the accepted claim is attempt 1, and has no lease).
func stateOf(rec Record) AsyncState {
	if rec.Attempt > 1 && rec.LeaseLeft > 0 {
		return AsyncRunning
	}
	return AsyncPending
}

// mountPrefix is the part of r's path before the operation's path in the
// spec, route: the prefix its routes are mounted under, whichever way the
// router mounts them. The request's URI is read as the client sent it,
// before any prefix was stripped.
func mountPrefix(r *http.Request, route string) string {
	if r == nil || route == "" {
		return ""
	}
	p := r.URL.EscapedPath()
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && r.RequestURI != "" {
		p = u.EscapedPath()
	}
	p = strings.TrimSuffix(p, "/")
	for range strings.Count(strings.TrimSuffix(route, "/"), "/") {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return ""
		}
		p = p[:i]
	}
	return p
}

// StatusLocation is the URL path of the status resource of key, from
// StatusPath, under no prefix; "" when op has none.
func (op *Operation) StatusLocation(key string) string {
	if op.StatusPath == "" {
		return ""
	}
	return strings.Replace(op.StatusPath, "{key}", keySegment(key), 1)
}

// keySegment is key as one segment of a URL's path. url.PathEscape
// leaves the dots of "." and ".." as they are, which routers and clients
// take for the segment itself or its parent, so those are escaped too.
func keySegment(key string) string {
	if key == "." || key == ".." {
		return strings.Repeat("%2E", len(key))
	}
	return url.PathEscape(key)
}

// Status answers a read of the status resource of an async request of op
// under key, in the request's scope (as ServeAsync finds it, from the
// *http.Request in ctx): 200 with its AsyncStatus, and Retry-After while
// it runs; 404 when the scope has no such request. It reads the key once
// and writes nothing.
func (e *Engine[T]) Status(ctx context.Context, op *Operation, key string) (*Response, error) {
	ctx, o := e.begin(ctx, TraceRequestStartData{Operation: op.Name})
	resp, err := e.status(ctx, op, key)
	e.end(ctx, op, o, resp, err)
	return resp, err
}

func (e *Engine[T]) status(ctx context.Context, op *Operation, key string) (*Response, error) {
	r := RequestFrom(ctx)
	if r == nil {
		return nil, errors.New("idem: no *http.Request in the context; mount the generated handler, which adds it")
	}
	if err := op.checkKey(key); err != nil {
		return e.invalidKey(op, err), nil
	}
	scope, resp := e.requestScope(ctx, r, op)
	if resp != nil {
		return resp, nil
	}
	id := ID{Scope: scope, Operation: op.Name, Key: key}
	observed(ctx).id = id
	step := e.startStep(ctx, op, StepLookup, "")
	rec, err := e.lookup(ctx, id)
	e.endLookup(ctx, step, err)
	switch {
	case err != nil:
		return e.storeFailed(ctx, "lookup", err), nil
	case !rec.Found || (rec.Completed && rec.Expired):
		resp := e.render(&Problem{Type: TypeAsyncNotFound, Title: "No such request", Status: http.StatusNotFound,
			Detail: fmt.Sprintf("No request of %s was accepted with this %s, or its result has expired. Check the key; to run the request, send it again.", op.Name, op.keyNoun())})
		resp.outcome = OutcomeStatus
		return resp, nil
	case !rec.Completed:
		resp := e.statusResponse(http.StatusOK, AsyncStatus{Status: stateOf(rec), RecoveryPoint: rec.RecoveryPoint})
		resp.outcome = OutcomeStatus
		return resp, nil
	}
	st := AsyncStatus{Status: AsyncSucceeded, Response: asyncResponse(rec.Response)}
	if rec.Response.Status >= 400 {
		st.Status = AsyncFailed
	}
	resp = e.statusResponse(http.StatusOK, st)
	resp.outcome = OutcomeStatus
	return resp, nil
}

func asyncResponse(r *Response) *AsyncResponse {
	a := &AsyncResponse{Status: r.Status, ContentType: r.Header.Get("Content-Type")}
	if len(r.Body) == 0 {
		return a
	}
	if isJSON(a.ContentType) && json.Valid(r.Body) {
		a.Body = r.Body
	} else {
		a.Body, _ = json.Marshal(string(r.Body))
	}
	return a
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// AcceptedRun is what a worker's run of an accepted request came to.
type AcceptedRun struct {
	// Response is the request's stored response: the one this run stored,
	// or one stored before. Nil when RetryIn is set, or when the key's
	// row is gone or holds a later use of the key, so that the job has
	// nothing left to do.
	Response *Response
	// RetryIn, when positive, says another worker holds the request's
	// lease: run the job again after it, when the lease has passed if
	// that worker stopped.
	RetryIn time.Duration
}

// RunAccepted runs accepted request a of async operation op on a worker:
// it takes the key over under the lease rules of a takeover (the fencing
// token makes a second worker of the same job, or a retry of it, find the
// key held), rebuilds the handler's phases from the stored request with
// phases, and runs them from the last recovery point to the stored
// response. An error is the handler's or the store's: the lease is
// released and the job may be retried.
func (e *Engine[T]) RunAccepted(ctx context.Context, op *Operation, a Accepted, phases func(ctx context.Context, request []byte) (PhaseFunc[T], error)) (AcceptedRun, error) {
	return e.runAccepted(ctx, op, a, func(ctx context.Context, request []byte) (PhaseFunc[T], error) {
		run, err := phases(ctx, request)
		if err != nil {
			return nil, fmt.Errorf("idem: %s: the stored request does not decode: %w", op.Name, err)
		}
		return run, nil
	})
}

// RunBound is how long a worker's run of an accepted request of op takes
// at most: the lookup and the claim, then each phase (one for an atomic
// handler) within its lease, its end and the store's bound on each wait
// (Options.StoreTimeout). A job system may take a run that lasts longer
// for a stuck one.
func (e *Engine[T]) RunBound(op *Operation) time.Duration {
	phases := time.Duration(len(op.RecoveryPoints) + 1)
	return 2*e.storeTimeout + phases*(op.Lease+2*e.storeTimeout)
}

// FailAccepted stores problem as the response of accepted request a,
// which will not be run again (its job ran out of attempts): its status
// resource and every retry of its key answer it. A request that is done
// already keeps its response.
func (e *Engine[T]) FailAccepted(ctx context.Context, op *Operation, a Accepted, problem *Problem) (AcceptedRun, error) {
	failed := Render(e.problems, problem)
	return e.runAccepted(ctx, op, a, func(context.Context, []byte) (PhaseFunc[T], error) {
		return func(context.Context, *Attempt[T]) (string, Writer, error) { return "", failed.Write, nil }, nil
	})
}

// AttemptsExhaustedProblem is the failure stored for an async request
// whose job failed all of its attempts. The errors are logged, not sent:
// they may hold the server's internals.
func AttemptsExhaustedProblem(attempts int) *Problem {
	return &Problem{
		Type:   TypeAsyncFailed,
		Title:  "Request failed",
		Status: http.StatusInternalServerError,
		Detail: fmt.Sprintf("The request was accepted, but running it failed %d times, so it will not be run again. What it committed before it stopped remains in effect. Check the current state of the resource, then, if still needed, send a new request with a new key.", attempts),
	}
}

func (e *Engine[T]) runAccepted(ctx context.Context, op *Operation, a Accepted, phases func(ctx context.Context, request []byte) (PhaseFunc[T], error)) (AcceptedRun, error) {
	acc := e.caps.accepter
	if acc == nil {
		return AcceptedRun{}, fmt.Errorf("%w: the store %T cannot run requests of async operations", ErrStoreMisconfigured, e.store)
	}
	if a.ID.Operation != op.Name {
		return AcceptedRun{}, fmt.Errorf("%w %s: a job of operation %q", ErrInvalidOperation, op.Name, a.ID.Operation)
	}
	for range maxTries {
		rec, err := e.lookup(ctx, a.ID)
		switch {
		case err != nil:
			return AcceptedRun{}, err
		case !rec.Found || rec.Generation != a.Generation:
			// Forgotten, reaped, or a later use of the key: not this
			// job's to run.
			e.log.WarnContext(ctx, "idem: an async job's request is no longer stored; nothing to run", "operation", op.Name, "key_hash", KeyHash(a.ID), "generation", a.Generation)
			return AcceptedRun{}, nil
		case rec.Completed:
			return AcceptedRun{Response: rec.Response}, nil
		case rec.Attempt > 1 && rec.LeaseLeft > 0:
			return AcceptedRun{RetryIn: rec.LeaseLeft}, nil
		}
		request, err := acc.AcceptedRequest(ctx, a.ID)
		switch {
		case errors.Is(err, ErrContended):
			continue // done or gone since the lookup: read it again
		case err != nil:
			return AcceptedRun{}, err
		}
		run, err := phases(ctx, request)
		if err != nil {
			return AcceptedRun{}, err
		}
		resp, err := e.resume(ctx, op, AbandonedAttempt{ID: a.ID, Fingerprint: rec.Fingerprint, Request: request, RecoveryPoint: rec.RecoveryPoint,
			Attempt: rec.Attempt, Generation: rec.Generation, PerRequest: rec.PerRequest}, run,
			TraceRequestStartData{Operation: op.Name, Phased: len(op.RecoveryPoints) > 0, Worker: true})
		switch {
		case errors.Is(err, ErrContended), errors.Is(err, errLeaseLost):
			continue // another worker took it: read it again
		case err != nil:
			return AcceptedRun{}, err
		}
		return AcceptedRun{Response: resp}, nil
	}
	return AcceptedRun{RetryIn: e.retryAfter}, nil
}
