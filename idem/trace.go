package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"
)

// Outcome is how the layer answered one request of an annotated
// operation. Every request ends in exactly one.
type Outcome uint8

// The outcomes. The zero Outcome is none: a request still being served.
const (
	// OutcomeFirst: the handler ran and its response was stored.
	OutcomeFirst Outcome = iota + 1
	// OutcomeTakeover: the handler ran, resuming an attempt whose holder
	// stopped (a crashed process), and its response was stored.
	OutcomeTakeover
	// OutcomeReplay: the stored response was sent again.
	OutcomeReplay
	// OutcomeUnkeyed: a request without a key, to an operation whose key
	// is optional, ran without the protocol.
	OutcomeUnkeyed
	// OutcomeConflict: 409, another attempt holds the key.
	OutcomeConflict
	// OutcomeMismatch: 422, the key was used with a different request.
	OutcomeMismatch
	// OutcomeMissingKey, OutcomeInvalidKey, OutcomeInvalidScope and
	// OutcomeInvalidRequest: the 400s, answered before any claim.
	OutcomeMissingKey
	OutcomeInvalidKey
	OutcomeInvalidScope
	OutcomeInvalidRequest
	// OutcomeBodyTooLarge: 413.
	OutcomeBodyTooLarge
	// OutcomeUnsupportedMediaType: 415.
	OutcomeUnsupportedMediaType
	// OutcomeStoreUnavailable: 503, the store could not be reached.
	OutcomeStoreUnavailable
	// OutcomeStoreBusy: 503, no connection to the store came free in time.
	OutcomeStoreBusy
	// OutcomeHandlerError: 500, the handler (or a phase) returned an error
	// or panicked; the attempt was undone.
	OutcomeHandlerError
	// OutcomeStoreError: 500, the store failed in a way that is neither
	// an outage nor one of the causes below.
	OutcomeStoreError
	// OutcomeStoreMisconfigured: 500, the store's schema or permissions
	// are wrong.
	OutcomeStoreMisconfigured
	// OutcomeCommitFailed: 500, the attempt's writes failed at COMMIT.
	OutcomeCommitFailed
	// OutcomeTransactionConflict: 500, a serialization failure or deadlock.
	OutcomeTransactionConflict
	// OutcomeLeaseOverrun: 500, the attempt ran longer than its lease.
	OutcomeLeaseOverrun
	// OutcomeClientClosed: the client went away before the answer (499
	// in logs); the attempt was rolled back.
	OutcomeClientClosed
	// OutcomeRefused: the application's own code refused the request
	// before the protocol ran, such as a strict middleware that returned
	// an *idem.Problem (a 401 without credentials); nothing was claimed
	// or stored.
	OutcomeRefused
	// OutcomeAccepted: 202, a request of an async operation was claimed
	// and its job enqueued; a worker runs it.
	OutcomeAccepted
	// OutcomeInProgress: 202, a retry of an async request that is still
	// pending or running.
	OutcomeInProgress
	// OutcomeStatus: a read of an async request's status resource.
	OutcomeStatus
)

var outcomeNames = [...]string{
	OutcomeFirst:                "first",
	OutcomeTakeover:             "takeover",
	OutcomeReplay:               "replay",
	OutcomeUnkeyed:              "unkeyed",
	OutcomeConflict:             "conflict",
	OutcomeMismatch:             "mismatch",
	OutcomeMissingKey:           "missing_key",
	OutcomeInvalidKey:           "invalid_key",
	OutcomeInvalidScope:         "invalid_scope",
	OutcomeInvalidRequest:       "invalid_request",
	OutcomeBodyTooLarge:         "body_too_large",
	OutcomeUnsupportedMediaType: "unsupported_media_type",
	OutcomeStoreUnavailable:     "store_unavailable",
	OutcomeStoreBusy:            "store_busy",
	OutcomeHandlerError:         "handler_error",
	OutcomeStoreError:           "store_error",
	OutcomeStoreMisconfigured:   "store_misconfigured",
	OutcomeCommitFailed:         "commit_failed",
	OutcomeTransactionConflict:  "transaction_conflict",
	OutcomeLeaseOverrun:         "lease_overrun",
	OutcomeClientClosed:         "client_closed",
	OutcomeRefused:              "refused",
	OutcomeAccepted:             "accepted",
	OutcomeInProgress:           "in_progress",
	OutcomeStatus:               "status",
}

// String is the outcome's name as metrics and logs carry it, such as
// "replay" or "store_unavailable".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return "none"
}

// Outcomes lists every outcome, in order.
func Outcomes() []Outcome {
	out := make([]Outcome, 0, len(outcomeNames)-1)
	for o := OutcomeFirst; int(o) < len(outcomeNames); o++ {
		out = append(out, o)
	}
	return out
}

// StoreTrouble reports whether the outcome is the key store's failure,
// which every request meets until it ends: what an operator is paged for.
// A commit that failed on the attempt's own writes is the handler's.
func (o Outcome) StoreTrouble() bool {
	switch o {
	case OutcomeStoreUnavailable, OutcomeStoreBusy, OutcomeStoreError, OutcomeStoreMisconfigured,
		OutcomeTransactionConflict:
		return true
	}
	return false
}

// outcomeOfProblem is the outcome of a request the layer answered with a
// problem of type typ.
func outcomeOfProblem(typ string) Outcome {
	switch typ {
	case TypeKeyInUse:
		return OutcomeConflict
	case TypeKeyReused:
		return OutcomeMismatch
	case TypeMissingKey:
		return OutcomeMissingKey
	case TypeInvalidKey:
		return OutcomeInvalidKey
	case TypeInvalidScope:
		return OutcomeInvalidScope
	case TypeInvalidRequest:
		return OutcomeInvalidRequest
	case TypeBodyTooLarge:
		return OutcomeBodyTooLarge
	case TypeUnsupportedMediaType:
		return OutcomeUnsupportedMediaType
	case TypeStoreUnavailable:
		return OutcomeStoreUnavailable
	case TypeStoreBusy:
		return OutcomeStoreBusy
	case TypeStoreMisconfigured:
		return OutcomeStoreMisconfigured
	case TypeCommitFailed:
		return OutcomeCommitFailed
	case TypeTransactionConflict:
		return OutcomeTransactionConflict
	case TypeLeaseOverrun:
		return OutcomeLeaseOverrun
	case TypeClientClosed:
		return OutcomeClientClosed
	case TypeInternal:
		return OutcomeStoreError
	}
	return 0
}

// outcomeOfRefusal is the outcome of a request answered with p before
// the protocol ran: the layer's own refusals by their type, and any other
// problem as the application's refusal.
func outcomeOfRefusal(p *Problem) Outcome {
	if o := outcomeOfProblem(p.Type); o != 0 {
		return o
	}
	return OutcomeRefused
}

// Tracer observes the requests of annotated operations, as pgx's
// QueryTracer observes queries: TraceRequestStart is called when the
// protocol takes a request, and the context it returns is the one the
// request runs in (a span's, say); TraceRequestEnd is called once, with
// the outcome. The OpenTelemetry adapter (package idemotel) and the log
// adapter (NewLogTracer) are Tracers; Tracers combines several.
//
// A Tracer may also be a StepTracer, to see the store's steps and the
// handler's attempt, and a MaintenanceTracer, to see the janitor's runs.
// Its methods are called from many goroutines at once.
type Tracer interface {
	TraceRequestStart(ctx context.Context, data TraceRequestStartData) context.Context
	TraceRequestEnd(ctx context.Context, data TraceRequestEndData)
}

// TraceRequestStartData is what is known of a request when the protocol
// takes it.
type TraceRequestStartData struct {
	// Operation is the operationId.
	Operation string
	// Phased is set for an operation with recovery points.
	Phased bool
	// Completer is set when a Completer, not a client, resumes an
	// abandoned attempt: not a request, so not to be counted as one.
	Completer bool
	// Worker is set when a worker runs an accepted request of an async
	// operation (Engine.RunAccepted): a run, not a request, whose client
	// was answered 202 when it was accepted.
	Worker bool
}

// TraceRequestEndData is how a request ended.
type TraceRequestEndData struct {
	Operation string
	Outcome   Outcome
	// Status is the HTTP status answered; 499 for a client that went away.
	Status int
	// id is the request's key, for KeyHash; never handed out.
	id ID
	// Attempt is the claim's fencing number: how many times the key's row
	// has been claimed, this attempt included; 0 when no attempt ran.
	Attempt int64
	// Generation is the use of the key the attempt belonged to (see
	// Attempt.Generation); 0 when no attempt ran.
	Generation int64
	// RecoveryPoint is the last recovery point the attempt committed.
	RecoveryPoint string
	// LeaseLost counts the times the request's attempt lost its key to a
	// takeover or the sweeper and the protocol decided again.
	LeaseLost int
	// Lookup is the time spent reading and claiming the key.
	Lookup time.Duration
	// Held is how long the request's attempts held the key: the handler,
	// or the phases, with their commits; 0 when none ran.
	Held time.Duration
	// Duration is the whole request's time in the protocol.
	Duration time.Duration
	// Err is the handler's error, or the store's, when there was one.
	Err error
	// Completer is set when a Completer, not a client, resumed an
	// abandoned attempt (see TraceRequestStartData.Completer).
	Completer bool
	// Worker is set when a worker ran an accepted request (see
	// TraceRequestStartData.Worker).
	Worker bool
	// Filter is what the store's replay filter answered, when it has one
	// (see ReplayFilter): a hit is a replay the store was not asked for.
	Filter FilterResult
}

// KeyHash is a short hash of the request's key, scope and operation (see
// KeyHash), to find the key in logs and in `idemgen keys`; "" when the
// request had no valid key. It is computed when asked for, so that a
// tracer that logs nothing for the request pays nothing for it.
func (d TraceRequestEndData) KeyHash() string {
	if d.id.Key == "" {
		return ""
	}
	return KeyHash(d.id)
}

// Step is one step of a request in the protocol, as a StepTracer sees it.
type Step uint8

// The steps.
const (
	// StepLookup reads the key. On a store that claims a free key in the
	// same statement (the Postgres store), the claim is part of it.
	StepLookup Step = iota + 1
	// StepClaim claims the key after a lookup found it taken over, past
	// its TTL or otherwise not claimable by the lookup itself.
	StepClaim
	// StepAttempt runs the handler, or one phase of a phased operation.
	StepAttempt
	// StepCommit commits the attempt's writes with its response or, for a
	// phase, its next recovery point.
	StepCommit
)

var stepNames = [...]string{StepLookup: "lookup", StepClaim: "claim", StepAttempt: "attempt", StepCommit: "commit"}

func (s Step) String() string {
	if int(s) < len(stepNames) && stepNames[s] != "" {
		return stepNames[s]
	}
	return "none"
}

// StepTracer is the optional part of a Tracer that sees each step of a
// request, such as to make a span of it. TraceStepStart's context is the
// one the step runs in: the handler's, for StepAttempt.
type StepTracer interface {
	TraceStepStart(ctx context.Context, data TraceStepData) context.Context
	TraceStepEnd(ctx context.Context, data TraceStepData, took time.Duration, err error)
}

// TraceStepData names a step.
type TraceStepData struct {
	Operation string
	Step      Step
	// RecoveryPoint is where a phased attempt's step starts from.
	RecoveryPoint string
}

// MaintenanceTracer is the optional part of a Tracer that sees the
// janitor's runs (the Postgres store's Janitor calls it).
type MaintenanceTracer interface {
	TraceMaintenance(ctx context.Context, data TraceMaintenanceData)
}

// TraceMaintenanceData is what one janitor run, or one completer run,
// found and did.
type TraceMaintenanceData struct {
	// Completer is set for a Completer's run, which finds no abandoned
	// attempts to report, only ones to finish.
	Completer bool
	// Abandoned counts attempts found abandoned and left for a retry (a
	// sweep that only reports).
	Abandoned int
	// Failed counts abandoned attempts given the attempt-abandoned answer.
	Failed int
	// Completed counts abandoned attempts the completer finished, and
	// CompletionFailed those it tried and could not.
	Completed, CompletionFailed int
	// Deleted and Emptied count the expired keys reaped.
	Deleted, Emptied int
	// DeletedEmptied counts the rows emptied earlier and deleted now,
	// past the store's horizon for derived keys.
	DeletedEmptied int
	// Duration is the run's time.
	Duration time.Duration
	// Err is the first failure of the run.
	Err error
}

// Tracers returns a Tracer that calls each of ts in turn, and their step
// and maintenance methods when they have them. Nil Tracers are left out.
func Tracers(ts ...Tracer) Tracer {
	var all multiTracer
	for _, t := range ts {
		switch t := t.(type) {
		case nil:
		case multiTracer:
			all = append(all, t...)
		default:
			all = append(all, t)
		}
	}
	if len(all) == 1 {
		return all[0]
	}
	return all
}

type multiTracer []Tracer

func (m multiTracer) TraceRequestStart(ctx context.Context, data TraceRequestStartData) context.Context {
	for _, t := range m {
		ctx = t.TraceRequestStart(ctx, data)
	}
	return ctx
}

func (m multiTracer) TraceRequestEnd(ctx context.Context, data TraceRequestEndData) {
	for _, t := range m {
		t.TraceRequestEnd(ctx, data)
	}
}

func (m multiTracer) TraceStepStart(ctx context.Context, data TraceStepData) context.Context {
	for _, t := range m {
		if st, ok := t.(StepTracer); ok {
			ctx = st.TraceStepStart(ctx, data)
		}
	}
	return ctx
}

func (m multiTracer) TraceStepEnd(ctx context.Context, data TraceStepData, took time.Duration, err error) {
	for _, t := range m {
		if st, ok := t.(StepTracer); ok {
			st.TraceStepEnd(ctx, data, took, err)
		}
	}
}

func (m multiTracer) TraceMaintenance(ctx context.Context, data TraceMaintenanceData) {
	for _, t := range m {
		if mt, ok := t.(MaintenanceTracer); ok {
			mt.TraceMaintenance(ctx, data)
		}
	}
}

// KeyHash is a short, stable hash of a key's scope, operation and key:
// what logs and traces carry instead of the key, which may be a secret of
// the client's, and what `idemgen keys list` shows beside each key.
func KeyHash(id ID) string {
	h := sha256.New()
	for _, s := range []string{id.Scope, id.Operation, id.Key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// statusOf is the status a request's outcome was answered with.
func statusOf(resp *Response, err error) int {
	switch {
	case resp != nil:
		return resp.Status
	case err != nil:
		return http.StatusInternalServerError
	}
	return 0
}
