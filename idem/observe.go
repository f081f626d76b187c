package idem

import (
	"context"
	"time"
)

// observation is what the engine notes of one request for its Tracer, as
// the request goes through the protocol. It is the request's context too,
// holding itself, so that noting it costs one allocation, not two.
type observation struct {
	context.Context
	start               time.Time
	id                  ID // once the key is valid
	attempt, generation int64
	point               string
	ran                 bool // an attempt ran and its response was stored
	takeover            bool
	leaseLost           int
	lookup, held        time.Duration
	err                 error // the store's error, or why the client went
	completer           bool  // a Completer's, not a client's
	worker              bool  // an async request's run on a worker
	filter              FilterResult
	// keyNoun is what the operation's key is called in its answers (see
	// Operation.keyNoun), once the request is identified.
	keyNoun string
}

// key is what the request's key is called in its answers: the
// Idempotency-Key header unless the operation takes it from elsewhere.
func (o *observation) key() string {
	if o.keyNoun == "" {
		return HeaderKey
	}
	return o.keyNoun
}

type observationKey struct{}

// Value finds the observation under observationKey, and the rest in the
// context it was made from.
func (o *observation) Value(key any) any {
	if key == (observationKey{}) {
		return o
	}
	return o.Context.Value(key)
}

// observed returns the request's observation; one made for nobody when
// the request did not come through Serve or ServePhased.
func observed(ctx context.Context) *observation {
	if o, ok := ctx.Value(observationKey{}).(*observation); ok {
		return o
	}
	return &observation{}
}

// claimed notes the claim an attempt runs under.
func (o *observation) claimed(c Claim) {
	o.attempt, o.generation, o.takeover = c.Attempt+1, c.Generation, c.Takeover
}

// begin starts observing a request of op.
func (e *Engine[T]) begin(ctx context.Context, start TraceRequestStartData) (context.Context, *observation) {
	o := &observation{Context: e.tracer.TraceRequestStart(ctx, start), start: time.Now(), completer: start.Completer, worker: start.Worker}
	return o, o
}

// end tells the tracer how the request ended.
func (e *Engine[T]) end(ctx context.Context, op *Operation, o *observation, resp *Response, err error) {
	data := TraceRequestEndData{
		Operation:     op.Name,
		Status:        statusOf(resp, err),
		id:            o.id,
		RecoveryPoint: o.point,
		LeaseLost:     o.leaseLost,
		Lookup:        o.lookup,
		Held:          o.held,
		Duration:      time.Since(o.start),
		Err:           o.err,
		Completer:     o.completer,
		Worker:        o.worker,
		Filter:        o.filter,
	}
	if o.attempt > 0 {
		data.Attempt, data.Generation = o.attempt, o.generation
	}
	switch {
	case err != nil || resp == nil:
		data.Outcome, data.Err = OutcomeHandlerError, err
	case resp.outcome != 0:
		data.Outcome = resp.outcome
	case resp.Replayed:
		data.Outcome = OutcomeReplay
	case o.id.Key == "":
		data.Outcome = OutcomeUnkeyed
	case o.takeover:
		data.Outcome = OutcomeTakeover
	default:
		data.Outcome = OutcomeFirst
	}
	if data.Outcome == OutcomeClientClosed {
		data.Status = StatusClientClosed
	}
	e.tracer.TraceRequestEnd(ctx, data)
}

// stepObservation is a step being observed.
type stepObservation struct {
	ctx   context.Context // the step's: a span's, say
	data  TraceStepData
	start time.Time
	steps StepTracer
}

// startStep starts observing a step of a request of op. Its ctx is the
// one the step runs in.
func (e *Engine[T]) startStep(ctx context.Context, op *Operation, s Step, point string) stepObservation {
	st := stepObservation{ctx: ctx, data: TraceStepData{Operation: op.Name, Step: s, RecoveryPoint: point}, start: time.Now(), steps: e.steps}
	if e.steps != nil {
		st.ctx = e.steps.TraceStepStart(ctx, st.data)
	}
	return st
}

// endStep ends a step and returns its time.
func (e *Engine[T]) endStep(st stepObservation, err error) time.Duration {
	took := time.Since(st.start)
	if st.steps != nil {
		st.steps.TraceStepEnd(st.ctx, st.data, took, err)
	}
	return took
}

// endLookup ends a lookup or a claim, counting its time as the request's
// time in the store before its attempt.
func (e *Engine[T]) endLookup(ctx context.Context, st stepObservation, err error) {
	observed(ctx).lookup += e.endStep(st, err)
}
