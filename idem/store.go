package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ID names one idempotency key: keys are independent across scopes
// (tenants) and operations.
type ID struct {
	Scope     string
	Operation string
	Key       string
}

// Record is what a store knows of a key, as read by [Store.Lookup]: facts
// only. The engine alone decides what they mean (a replay, a 409, a 422,
// a claim or a takeover), so every store answers alike.
type Record struct {
	// Found reports that the store has a committed row for the key. An
	// atomic attempt's claim has none until it completes: it is only Held.
	Found bool
	// Completed reports that the row holds a response; a found row that
	// is not completed is an attempt in flight (a phased attempt's lease).
	Completed bool
	// Held reports that a live claimant holds the key right now: an
	// atomic attempt whose claim is not visible yet, or a running phase.
	// A store may leave it false for a completed row within its TTL,
	// which is replayed whoever holds the key.
	Held bool
	// Fingerprint of the request that made the row.
	Fingerprint []byte
	// Expired reports that the row's TTL has passed.
	Expired bool
	// LeaseLeft is how long the lease of an in-flight row still runs;
	// zero or less once it has passed, when another request may take over.
	LeaseLeft time.Duration
	// RecoveryPoint is the last point a phased attempt committed.
	RecoveryPoint string
	// Generation counts the uses of the key: 1 for the first, one more
	// each time it is claimed anew after its TTL. Derived keys differ
	// from one generation to the next. A store keeps it past the reaper
	// for every key whose attempts derived a key (see
	// DerivationRecorder): such a row is emptied, not deleted.
	Generation int64
	// Attempt counts the row's claims, takeovers included; a Claim names
	// the one it read, so that it succeeds only on the row it decided on.
	Attempt int64
	// PerRequest reports that the row's use derives keys from its request
	// too (Options.DerivedKeysPerRequest as the use began); false for rows
	// written before stores recorded it.
	PerRequest bool
	// Response is the stored response of a completed row.
	Response *Response
}

// Claim is what a new attempt records when it claims a key. The engine
// decides from a Record whether the key may be claimed, and the claim
// succeeds only while the key is still as that Record says: otherwise the
// store answers ErrContended and the engine reads the key again.
type Claim struct {
	Fingerprint []byte
	// TTL is how long the key and its response are kept.
	TTL time.Duration
	// Lease is how long the attempt holds the key before others may take
	// over. Stores also bound how long a claim's transaction may sit idle
	// by it, so that a vanished holder frees the key.
	Lease time.Duration
	// Attempt is the Record's Attempt: 0 when no row was found.
	Attempt int64
	// Generation is the generation the attempt belongs to, as the engine
	// counts it from the Record (see Record.Generation). Stores record it
	// as given and never count generations themselves.
	Generation int64
	// Request is the request as the handler received it, as JSON, for a
	// lease to keep for the Completer (see Operation.Abandoned); nil for
	// an operation it does not complete. A takeover keeps the one stored.
	Request []byte
	// PerRequest is recorded as the row's Record.PerRequest: how the use
	// derives keys. A takeover passes the row's, and stores keep it.
	PerRequest bool
	// Takeover claims the in-flight row the Record read, whose lease has
	// passed: it resumes at the row's recovery point, in the same
	// generation. Otherwise the key must be free: no row, or the completed
	// row read, past its TTL, which a new generation replaces.
	Takeover bool
}

// RowState is what a claim needs to know of a key's row as it is when the
// claim is made.
type RowState struct {
	Found bool
	// Terminal: the row holds a response, or held one and was emptied by
	// the reaper. Otherwise it is an attempt in flight.
	Terminal bool
	Attempt  int64
	// Expired: the row's TTL has passed. LeasePassed: the lease of an
	// in-flight row has passed.
	Expired, LeasePassed bool
}

// Claimable reports whether claim c, decided on from an earlier read of
// the key, may be made on the key's row as it is now: the claim holds only
// while the row is still as read. A new use needs no row (Attempt 0) or
// the terminal row read, past its TTL; a takeover needs the in-flight row
// read, past its lease. This is the one rule every store applies; the
// Postgres store's SQL function idemgen_claimable says the same, and the
// conformance suite holds both to it.
func Claimable(row RowState, c Claim) bool {
	switch {
	case !row.Found:
		return c.Attempt == 0 && !c.Takeover
	case row.Attempt != c.Attempt:
		return false
	case c.Takeover:
		return !row.Terminal && row.LeasePassed
	}
	return row.Terminal && row.Expired
}

// DerivationRecorder is a Txn that records that its attempt derived a key
// (Attempt.DerivedKey), so that the store keeps the key's generation when
// the reaper ends its row: the key's next use then counts the next
// generation, and derives keys never used before. The engine calls
// RecordDerivation at most once, before the attempt ends. A phased
// attempt's lease counts as derived from the start.
type DerivationRecorder interface {
	RecordDerivation()
}

// ErrContended reports that a claim lost a race: another attempt holds the
// key, or its row changed since the lookup. The caller reads the key again.
var ErrContended = errors.New("idem: key contended")

// ErrLeaseLost reports that a phased attempt no longer holds its key: its
// lease passed and another attempt took over, or the lease sweeper failed
// it. The attempt must stop; what it committed stays.
var ErrLeaseLost = errors.New("idem: lease lost")

// Store errors are classified where they arise: a store wraps each error
// it returns in one of these, and the engine answers by the class alone.
var (
	// ErrStoreUnavailable: the store could not be reached or went away (a
	// refused or lost connection, a server shutting down, no free
	// connection in time). The engine answers 503 with Retry-After.
	ErrStoreUnavailable = errors.New("idem: key store unavailable")
	// ErrCommitUnknown, beside ErrStoreUnavailable: the commit of an
	// attempt was sent and its acknowledgement lost, so the attempt may
	// have committed. A retry with the same key returns its result.
	ErrCommitUnknown = errors.New("idem: commit outcome unknown")
	// ErrStoreRejectedInput: the store refused a value the request
	// supplied. The engine answers 400.
	ErrStoreRejectedInput = errors.New("idem: key store rejected the request's values")
	// ErrStoreBusy, beside ErrStoreUnavailable: the store is reachable,
	// but no connection came free within its bound. The engine answers
	// 503 saying the store is busy, and logs a warning, not an error.
	ErrStoreBusy = errors.New("idem: key store busy")
	// ErrStoreMisconfigured: the store's schema is missing or older than
	// the code, or its role may not use it. The engine answers 500 naming
	// the fix, and logs each cause once.
	ErrStoreMisconfigured = errors.New("idem: key store misconfigured")
	// ErrTransactionConflict: the attempt's transaction lost to a
	// concurrent one (a serialization failure or a deadlock) and was
	// rolled back. The engine answers 500 with Retry-After: a retry with
	// the same key runs it again and may well succeed.
	ErrTransactionConflict = errors.New("idem: the attempt's transaction conflicted with a concurrent one")
	// ErrLeaseOverrun: the attempt's transaction sat idle for longer than
	// its lease, so the store ended it (the bound that frees the key of a
	// holder that vanished). Every retry meets the same until the work
	// fits the lease: the engine answers 500 naming the overrun.
	ErrLeaseOverrun = errors.New("idem: the attempt overran its lease, so the store ended its transaction")
)

// ErrorClassifier is a Store that can classify an error a handler's own
// statement returned, as it classifies its own: the engine asks it when an
// attempt's connection was lost, to tell a lease overrun from an outage.
type ErrorClassifier interface {
	ClassifyError(err error) error
}

// Store is a key store. T is the transaction type an attempt hands to the
// handler: pgx.Tx for the Postgres store.
type Store[T any] interface {
	// Lookup reads a key. It never writes, so replays, 409s and 422s cost
	// no commit.
	Lookup(ctx context.Context, id ID) (Record, error)
	// Claim starts an atomic attempt that holds the key until it ends; its
	// claim is not visible to Lookup as a row, only as Held. It fails with
	// ErrContended when the key is held or no longer as c expects.
	Claim(ctx context.Context, id ID, c Claim) (Txn[T], error)
	// Lease claims a key for a phased attempt and commits the claim at
	// once, as an in-flight row that others see until the lease passes.
	// A takeover keeps the row's recovery point. It fails with
	// ErrContended like Claim.
	Lease(ctx context.Context, id ID, c Claim) (Lease[T], error)
	// Begin starts an attempt without a key, for an operation whose key is
	// optional and a request that sent none.
	Begin(ctx context.Context) (Txn[T], error)
	// Secret returns the store's key for derived keys: the same in every
	// process that shares the store, and never sent to clients.
	Secret(ctx context.Context) ([]byte, error)
	// Capabilities reports what the store does beyond these methods. A
	// wrapper around a store (one that counts calls for metrics, say)
	// reports what it forwards: embedding the Store interface forwards
	// this method but not those the capabilities name, and NewEngine
	// refuses a store that reports a capability its type lacks, rather
	// than run without it unseen.
	Capabilities() Capabilities
}

// Capabilities are the optional interfaces of this package a store's
// type implements and wants used. The zero value is a store of Store's
// methods alone.
type Capabilities struct {
	// LookupClaim: the store is a LookupClaimer, and a first execution
	// claims its key in its lookup's round trip.
	LookupClaim bool
	// ReplayFilter: the store is a ReplayFilter, such as pgstore's with
	// Redis in front, and replays are asked of it first.
	ReplayFilter bool
	// ClassifyError: the store is an ErrorClassifier, and tells a lease
	// overrun among a handler's errors.
	ClassifyError bool
	// FindAbandoned: the store is an AbandonedFinder, which the completer
	// needs.
	FindAbandoned bool
	// Accept: the store is an Accepter, which async operations need.
	Accept bool
}

// capabilitiesOf resolves the capabilities store reports to the
// interfaces that serve them, and fails naming any its type lacks.
func capabilitiesOf[T any](store Store[T]) (c resolved[T], err error) {
	caps := store.Capabilities()
	var missing []string
	if caps.LookupClaim {
		if c.lookupClaimer, _ = store.(LookupClaimer[T]); c.lookupClaimer == nil {
			missing = append(missing, "LookupClaim (idem.LookupClaimer)")
		}
	}
	if caps.ReplayFilter {
		if c.filter, _ = store.(ReplayFilter); c.filter == nil {
			missing = append(missing, "FilteredReplay (idem.ReplayFilter)")
		}
	}
	if caps.ClassifyError {
		if c.classifier, _ = store.(ErrorClassifier); c.classifier == nil {
			missing = append(missing, "ClassifyError (idem.ErrorClassifier)")
		}
	}
	if caps.FindAbandoned {
		if c.finder, _ = store.(AbandonedFinder); c.finder == nil {
			missing = append(missing, "FindAbandoned (idem.AbandonedFinder)")
		}
	}
	if caps.Accept {
		if c.accepter, _ = store.(Accepter[T]); c.accepter == nil {
			missing = append(missing, "Accept (idem.Accepter)")
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("idem: the store %T reports capabilities its type does not implement: %s; a wrapper must forward each of them to the store it wraps, or override Capabilities to report only what it forwards",
			store, strings.Join(missing, ", "))
	}
	return c, nil
}

// resolved are a store's capabilities, as the interfaces that serve them;
// nil where the store has none.
type resolved[T any] struct {
	lookupClaimer LookupClaimer[T]
	filter        ReplayFilter
	classifier    ErrorClassifier
	finder        AbandonedFinder
	accepter      Accepter[T]
}

// LookupClaimer is a Store that can also claim a key in its lookup's
// round trip, which saves a first execution one round trip. LookupClaim
// reads the key like Lookup; when the store has no row for it and no
// attempt holds it, it claims it for an atomic attempt with c (a first
// generation: Attempt 0, Generation 1) and returns that attempt's Txn.
// Otherwise the Txn is nil, and the engine decides from the Record as it
// does after Lookup.
type LookupClaimer[T any] interface {
	LookupClaim(ctx context.Context, id ID, c Claim) (Record, Txn[T], error)
}

// AcceptTxn is a Txn of a lookup's claim (LookupClaimer) that can accept
// a request of an async operation instead of running one: Accept inserts
// the job with enqueue on the claim's transaction, writes the key's
// in-flight row holding c.Request, and commits both, or neither (freeing
// the key). The engine uses it when the store offers it, and Accepter's
// Accept otherwise.
type AcceptTxn[T any] interface {
	Txn[T]
	Accept(ctx context.Context, c Claim, enqueue func(ctx context.Context, tx T) error) error
}

// Lease is a phased attempt's committed hold on a key.
type Lease[T any] interface {
	// RecoveryPoint is the last point committed for the key when the lease
	// was taken: "" for a new key, where to resume after a takeover.
	RecoveryPoint() string
	// Phase begins the next phase's transaction. It fails with
	// ErrLeaseLost when the key is no longer this attempt's, and extends
	// the lease by the claim's Lease otherwise.
	Phase(ctx context.Context) (Phase[T], error)
	// Release ends the lease early, keeping what the phases committed, so
	// that a retry takes over at once.
	Release(ctx context.Context) error
}

// Phase is the store's side of one phase of a phased attempt. Complete
// stores the response and ends the attempt; Abort rolls back the phase's
// writes but keeps the lease.
type Phase[T any] interface {
	Txn[T]
	// Advance commits the phase's writes together with the recovery point
	// it reached.
	Advance(ctx context.Context, point string) error
}

// Txn is the store's side of one attempt.
type Txn[T any] interface {
	// Tx is the transaction the handler's writes join.
	Tx() T
	// Complete stores the response and ends the attempt, committing the
	// handler's writes with it. An attempt without a key (see Begin) stores
	// nothing and only commits; r may then be nil.
	Complete(ctx context.Context, r *Response) error
	// Abort ends the attempt without a response, undoing its claim so a
	// retry runs again. It fails with ErrStoreUnavailable when the
	// attempt's own connection was lost, which is how the engine tells a
	// handler error caused by the store going away from any other.
	Abort(ctx context.Context) error
}

// ReplayFilter is a Store with a cache of completed responses in front of
// it, such as pgstore's with Redis (Options.ReplayCache): the engine asks
// it before the store's lookup, and a hit is answered as a replay without
// the store. It only ever answers replays: a hit is a response the store
// committed for exactly this key and fingerprint, within the key's TTL.
// Every other decision (a claim, a 409, a 422, a takeover) is the store's,
// which a miss or a failure falls back to.
type ReplayFilter interface {
	FilteredReplay(ctx context.Context, id ID, fingerprint []byte) (*Response, FilterResult)
}

// FilterResult is what a ReplayFilter's lookup came to.
type FilterResult uint8

const (
	FilterNone   FilterResult = iota // no filter was asked
	FilterHit                        // the filter answered the replay
	FilterMiss                       // the filter had no answer for this key and fingerprint
	FilterFailed                     // the filter could not be reached in time; the store answered
)

var filterResultNames = [...]string{"none", "hit", "miss", "failed"}

func (r FilterResult) String() string {
	if int(r) < len(filterResultNames) {
		return filterResultNames[r]
	}
	return "unknown"
}
