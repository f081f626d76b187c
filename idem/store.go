package idem

import (
	"context"
	"errors"
	"time"
)

// ID names one idempotency key: keys are independent across scopes
// (tenants) and operations.
type ID struct {
	Scope     string
	Operation string
	Key       string
}

// State is what the store knows about a key.
type State int

const (
	// Absent: no live record; the key is new or its TTL has passed.
	Absent State = iota
	// Busy: an attempt holds the key right now.
	Busy
	// Abandoned: an attempt claimed the key and its lease expired without
	// a response: its process died. The next request may take over.
	Abandoned
	// Completed: a response is stored.
	Completed
)

func (s State) String() string {
	switch s {
	case Absent:
		return "absent"
	case Busy:
		return "busy"
	case Abandoned:
		return "abandoned"
	case Completed:
		return "completed"
	}
	return "unknown"
}

// Record is a key's state as read by [Store.Lookup].
type Record struct {
	State State
	// Fingerprint of the request that claimed the key. Nil for a Busy key
	// whose claim is not yet visible (an atomic attempt in progress).
	Fingerprint []byte
	// RecoveryPoint is the last point a phased attempt committed.
	RecoveryPoint string
	// Response is the stored response of a Completed key.
	Response *Response
}

// Claim is what a new attempt records when it claims a key.
type Claim struct {
	Fingerprint []byte
	// TTL is how long the key and its response are kept.
	TTL time.Duration
	// Lease is how long the attempt holds the key before others may take
	// over, for stores where a claim outlives its transaction.
	Lease time.Duration
}

// ErrContended reports that a claim lost a race: another attempt holds the
// key, or a record appeared since the lookup. The caller reads the key again.
var ErrContended = errors.New("idem: key contended")

// ErrLeaseLost reports that a phased attempt no longer holds its key: its
// lease passed and another attempt took over, or the lease sweeper failed
// it. The attempt must stop; what it committed stays.
var ErrLeaseLost = errors.New("idem: lease lost")

// Store is a key store. T is the transaction type an attempt hands to the
// handler: pgx.Tx for the Postgres store.
type Store[T any] interface {
	// Lookup reads a key. It never writes, so replays, 409s and 422s cost
	// no commit.
	Lookup(ctx context.Context, id ID) (Record, error)
	// Claim starts an attempt that owns the key, replacing a record whose
	// TTL has passed or taking over an Abandoned one. It fails with
	// ErrContended when the key is held or a live record exists.
	Claim(ctx context.Context, id ID, c Claim) (Txn[T], error)
	// Lease claims a key for a phased attempt and commits the claim at
	// once: others see the key busy until the lease passes. Like Claim, it
	// replaces a record whose TTL has passed, takes over an Abandoned one
	// (keeping its recovery point) and fails with ErrContended otherwise.
	Lease(ctx context.Context, id ID, c Claim) (Lease[T], error)
	// Begin starts an attempt without a key, for an operation whose key is
	// optional and a request that sent none.
	Begin(ctx context.Context) (Txn[T], error)
	// Secret returns the store's key for derived keys: the same in every
	// process that shares the store, and never sent to clients.
	Secret(ctx context.Context) ([]byte, error)
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
	// retry runs again.
	Abort(ctx context.Context) error
}

// ErrorClassifier is implemented by stores that can tell when an error
// means their database is unreachable: a lost or refused connection, a
// server shutting down or restarting. The engine then answers a handler
// error caused that way, such as a failed write through the attempt's
// transaction, with 503 and Retry-After, as it does its own store
// failures, instead of a 500.
type ErrorClassifier interface {
	Unavailable(err error) bool
}
