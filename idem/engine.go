package idem

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Operation is the idempotency contract of one annotated operation; the
// generated code declares one per operation from the spec's annotations.
type Operation struct {
	// Name is the operationId in the spec; keys are independent per name.
	Name string
	// KeyOptional lets a request without an Idempotency-Key run, without
	// idempotency. By default the key is required.
	KeyOptional bool
	// TTL is how long a stored response is replayed.
	TTL time.Duration
	// Lease is how long an attempt holds the key before another request
	// may take over.
	Lease time.Duration
	// FingerprintExclude lists JSON pointers into the body that do not
	// count towards the fingerprint, to pass to Fingerprint. The generated
	// fingerprint writers leave them out by themselves; the generated
	// Operation lists them for reading.
	FingerprintExclude []string
	// RecoveryPoints are the points of a phased operation, in order; see
	// Engine.ServePhased.
	RecoveryPoints []string
	// KeyMinLen and KeyMaxLen, when positive, bound the key's length
	// (after unquoting), within 1 to MaxKeyLen, and KeyPattern, when set,
	// is a pattern the key must match, unanchored as in JSON Schema: the
	// limits of an Idempotency-Key parameter the spec declares itself.
	KeyMinLen, KeyMaxLen int
	KeyPattern           *regexp.Regexp
	// Abandoned says what a Completer does with a phased attempt whose
	// lease passed CompleteAfter ago without a retry: the annotation's
	// abandoned. The zero value leaves it for a retry to take over.
	Abandoned Abandoned
	// CompleteAfter is how long after its lease passed an attempt counts
	// as abandoned by its client; zero means an hour.
	CompleteAfter time.Duration
	// KeyFrom are where the operation takes its key from, in order, when
	// that is not the Idempotency-Key header, as the spec's key annotation
	// says: the generated handler hands the request's values there to
	// the engine with WithKey. Several make a composite key. KeyOptional
	// then lets a request that has none of them run without idempotency.
	KeyFrom []KeySource
	// ScopeHeader names a request header whose value scopes the keys, as
	// the spec's scope: {header: NAME} says: a request without it gets a
	// 400 problem naming it. With Options.Scope also set, a key's scope
	// is both (see Options.Scope).
	ScopeHeader string
	// Async runs the operation's requests on workers: see ServeAsync.
	// RecoveryPoints may be set too, for a handler in phases.
	Async bool
	// StatusPath is the URL path of an async request's status resource,
	// where "{key}" stands for its key, escaped: the Location of its 202
	// answers. Path is the operation's own path in the spec: the part of
	// a request's URL before it is the prefix the routes are mounted
	// under (a BaseURL, a group, a mount point), which Location gets too.
	StatusPath string
	Path       string
}

// ErrInvalidOperation reports an Operation the engine cannot serve, such
// as one whose TTL or Lease is zero: its errors name the field.
var ErrInvalidOperation = errors.New("idem: invalid operation")

// Validate reports what is wrong with op, naming the field: an operation
// without a name, or whose TTL or Lease is not positive, would silently
// switch idempotency off (a zero TTL stores responses already expired, so
// every retry runs again; a zero lease lets a retry take over between
// phases). The engine refuses such an operation on every request; call
// Validate at start to refuse it sooner.
func (op *Operation) Validate() error {
	switch {
	case op.Name == "":
		return fmt.Errorf("%w: Name is empty; set it to the operationId, which keys are scoped by", ErrInvalidOperation)
	case op.TTL <= 0:
		return fmt.Errorf("%w %s: TTL is %v; set it to how long a response is replayed, such as 24h (the annotation's ttl)", ErrInvalidOperation, op.Name, op.TTL)
	case op.Lease <= 0:
		return fmt.Errorf("%w %s: Lease is %v; set it to how long an attempt may hold the key before a retry takes over, such as 1m (the annotation's lease)", ErrInvalidOperation, op.Name, op.Lease)
	case op.Async && op.KeyOptional:
		return fmt.Errorf("%w %s: Async and KeyOptional are both set; an async request is found again only by its key", ErrInvalidOperation, op.Name)
	}
	return nil
}

// Options configure an Engine. The zero value works: one scope for all
// requests, the default logger, Retry-After of one second.
type Options struct {
	// Scope returns the scope of a request, such as its tenant or
	// authenticated principal; keys never cross scopes. ctx is the
	// request's context as the strict middlewares left it, so a principal
	// an auth middleware stored there is visible; r is the HTTP request.
	// It may return a *Problem to choose the answer; other errors answer
	// 400 without their text, which is logged instead, as it may hold the
	// server's internals. A scope must be valid UTF-8 without NUL bytes and at most
	// MaxScopeLen bytes long, or the request gets a 400 invalid-scope
	// problem. When the operation also has a ScopeHeader, the key's scope
	// is this one and the header's value, joined by ScopeSeparator.
	Scope func(ctx context.Context, r *http.Request) (string, error)
	// Logger receives one record per request of an annotated operation,
	// with its outcome (see NewLogTracer), and the errors of the store's
	// housekeeping; nil uses slog.Default().
	Logger *slog.Logger
	// Tracer observes every request's outcome, and its steps when it is
	// also a StepTracer, beside the Logger: the OpenTelemetry adapter in
	// package idemotel, say, or your own. Nil observes only through the
	// Logger.
	Tracer Tracer
	// RetryAfter is sent with 503 answers and with 409s on an atomic
	// attempt; zero means one second.
	RetryAfter time.Duration
	// MaxRetryAfter caps the Retry-After of a 409 on a phased attempt,
	// which is otherwise the time left on its lease; zero means 30s.
	MaxRetryAfter time.Duration
	// Problems renders the answers the layer gives itself (400, 409, 413,
	// 415, 422, 500, 503) in the API's own error shape, such as an
	// *ErrorShape; nil is RFC 9457 problem+json. The generated handler
	// sets it from the config's errors section when this is nil.
	Problems ProblemShape
	// Secret keys the derived keys of attempts (Attempt.DerivedKey). Nil
	// uses the store's own secret, which its migrations create; set it to
	// share derived keys across stores.
	Secret []byte
	// DerivedKeysPerRequest makes the keys a new use of a key derives
	// (Attempt.DerivedKey) depend on its request too: a request that
	// reuses a key after a failed attempt with another body then gets
	// keys of its own, rather than the failed attempt's, which a provider
	// would take for a retry of it, while a retry of the same request
	// keeps them. A key's row records which way its use derives, so an
	// attempt that takes over or resumes derives as the use began,
	// whatever this says.
	//
	// Turn it on once no instance of a release before v0.2.0 serves the
	// store, on every instance in one step: an older instance derives the
	// older way for a retry of an attempt that failed here without leaving
	// a row (an atomic attempt), and so does an instance not yet switched.
	// The next release turns it on by default.
	DerivedKeysPerRequest bool
	// StoreTimeout bounds each wait on the key store outside a handler
	// (a lookup, a claim, a phase's start), and how long past its lease
	// an attempt's handler, or a phase, runs before its context ends. A
	// database that stops answering without closing its connections (a
	// network partition, a frozen host) then gets 503 store-unavailable
	// with Retry-After, and the stalled connection is closed, instead of
	// a request that never ends. An attempt that reaches the bound while
	// the store still answers overran its lease and gets 500
	// lease-overrun. Zero means 5s.
	StoreTimeout time.Duration
}

// Observer is what requests are reported to: a log tracer on the Logger
// (see NewLogTracer), then the Tracer.
func (o Options) Observer() Tracer {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return Tracers(NewLogTracer(log, LogTracerOptions{}), o.Tracer)
}

// Engine runs requests of annotated operations through the protocol.
type Engine[T any] struct {
	store         Store[T]
	scope         func(context.Context, *http.Request) (string, error)
	log           *slog.Logger
	retryAfter    time.Duration
	maxRetryAfter time.Duration
	storeTimeout  time.Duration
	problems      ProblemShape
	tracer        Tracer
	steps         StepTracer // the tracer's steps; nil when it has none
	caps          resolved[T]
	perRequest    bool // Options.DerivedKeysPerRequest

	secret atomic.Pointer[[]byte] // read from the store at the first claim
}

// NewEngine returns an engine on store. It panics when the store reports
// a capability its type does not implement (see Store.Capabilities): a
// wrapper that would lose it without a word, which is a mistake in the
// program, found at its start.
func NewEngine[T any](store Store[T], opts Options) *Engine[T] {
	e := &Engine[T]{store: store, scope: opts.Scope, log: opts.Logger, retryAfter: opts.RetryAfter, maxRetryAfter: opts.MaxRetryAfter, storeTimeout: opts.StoreTimeout, problems: opts.Problems,
		perRequest: opts.DerivedKeysPerRequest}
	caps, err := capabilitiesOf(store)
	if err != nil {
		panic(err)
	}
	e.caps = caps
	if opts.Secret != nil {
		e.secret.Store(&opts.Secret)
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.tracer = opts.Observer()
	e.steps, _ = e.tracer.(StepTracer)
	if e.retryAfter <= 0 {
		e.retryAfter = time.Second
	}
	if e.maxRetryAfter <= 0 {
		e.maxRetryAfter = 30 * time.Second
	}
	if e.storeTimeout <= 0 {
		e.storeTimeout = 5 * time.Second
	}
	return e
}

// Attempt is one execution of an annotated operation's handler, holding
// the key; in a phased operation, one phase of it. T is the store's
// transaction type.
type Attempt[T any] struct {
	tx         T
	id         ID
	generation int64
	point      string
	secret     []byte
	nonce      string // the key of derived keys when the request sent none
	// perRequest makes derived keys depend on fingerprint, the request's,
	// as the key's use began (Record.PerRequest).
	perRequest  bool
	fingerprint []byte
	// started is when the attempt, or in a phased operation its phase,
	// began holding the key: one that ran for longer than its lease was
	// ended by the store, not by an outage.
	started time.Time
	// derived is set once the attempt derives a key; recorder, when set,
	// is told then.
	derived  atomic.Bool
	recorder DerivationRecorder
}

// recordDerivations makes at tell txn when it derives a key, if txn keeps
// that (see DerivationRecorder).
func (a *Attempt[T]) recordDerivations(txn any) *Attempt[T] {
	a.recorder, _ = txn.(DerivationRecorder)
	return a
}

// Tx is the attempt's transaction (in a phased operation, the phase's).
// With the Postgres store it is a pgx.Tx whose writes commit together with
// the stored response or recovery point; do not commit or roll it back
// yourself.
func (a *Attempt[T]) Tx() T { return a.tx }

// RecoveryPoint is the point this phase starts from: "" in the first
// phase, the last committed point in the others. Always "" in an atomic
// operation.
func (a *Attempt[T]) RecoveryPoint() string { return a.point }

// DerivedKey returns the idempotency key to send with the foreign call
// name, such as a payment provider's charge: the same in every retry and
// takeover of this use of the request's key, different for every other
// key, scope, operation and name, and for the key's next generation (its
// reuse after the TTL), and not computable by the client. With
// Options.DerivedKeysPerRequest it differs for every other request under
// the key too, such as one that reuses it after a failed attempt. For a
// request sent without a key (its operation's key is optional) it is
// random.
func (a *Attempt[T]) DerivedKey(name string) string {
	if !a.derived.Swap(true) && a.recorder != nil {
		a.recorder.RecordDerivation()
	}
	key := a.id.Key
	if key == "" {
		key = "\x00" + a.nonce // no valid Idempotency-Key starts with a NUL
	}
	var parts []string
	switch {
	case a.perRequest && a.id.Key != "":
		parts = []string{"idemgen derived key v2", a.id.Scope, a.id.Operation, key, name,
			strconv.FormatInt(a.generation, 10), string(a.fingerprint)}
	default:
		parts = []string{"idemgen derived key v1", a.id.Scope, a.id.Operation, key, name}
		if a.generation > 1 {
			// The first generation's keys stay what they were before
			// generations were counted, so attempts in flight keep theirs.
			parts = append(parts, strconv.FormatInt(a.generation, 10))
		}
	}
	m := hmac.New(sha256.New, a.secret)
	for _, s := range parts {
		var n [binary.MaxVarintLen64]byte
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		m.Write([]byte(s))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Generation is the use of the key this attempt belongs to: 1 for the
// first, one more each time the key is reused after its TTL. Retries and
// takeovers keep it. 0 for a request without a key.
func (a *Attempt[T]) Generation() int64 { return a.generation }

// Key is the request's idempotency key; empty when the operation's key is
// optional and the request sent none.
func (a *Attempt[T]) Key() string { return a.id.Key }

// Scope is the request's scope; empty, like Key, for a request that sent
// no key to an operation whose key is optional.
func (a *Attempt[T]) Scope() string { return a.id.Scope }

// Handler runs an operation's business logic inside an attempt and returns
// the typed response's writer. The generated code wraps the user's method.
type Handler[T any] func(ctx context.Context, at *Attempt[T]) (Writer, error)

// PanicError is returned when a handler panics; the attempt was undone.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("idem: handler panicked: %v", e.Value) }

// maxTries bounds lookup-claim rounds: a claim that loses a race reads the
// key again, and a key that keeps changing gets a 409.
const maxTries = 8

// Serve answers one request of an atomic operation op. The *http.Request
// must be in ctx (see WithRequest); fingerprint is the request's
// Fingerprint. It returns the response to send, or the handler's error,
// which the caller answers with a 500.
func (e *Engine[T]) Serve(ctx context.Context, op *Operation, fingerprint []byte, h Handler[T]) (*Response, error) {
	ctx, o := e.begin(ctx, TraceRequestStartData{Operation: op.Name})
	resp, err := e.serve(ctx, op, fingerprint, h)
	e.end(ctx, op, o, resp, err)
	return resp, err
}

func (e *Engine[T]) serve(ctx context.Context, op *Operation, fingerprint []byte, h Handler[T]) (*Response, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	id, resp, err := e.identify(ctx, op)
	if resp != nil || err != nil {
		return resp, err
	}
	// Read before any claim, which may hold the pool's last connection;
	// the engine keeps it, so only its first request reads it.
	secret, err := e.derivationSecret(ctx)
	if err != nil {
		return e.storeFailed(ctx, "secret", err), nil
	}
	if id.Key == "" {
		var txn Txn[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			txn, err = e.store.Begin(ctx)
			return err
		})
		if err != nil {
			return e.storeFailed(ctx, "begin", err), nil
		}
		return e.execute(ctx, op, txn, &Attempt[T]{tx: txn.Tx(), id: id, secret: secret, nonce: nonce()}, h)
	}
	lc := e.caps.lookupClaimer
	read := func() (Record, outcome, error) {
		step := e.startStep(ctx, op, StepLookup, "")
		if rec, ok := e.filtered(ctx, id, fingerprint); ok {
			e.endLookup(ctx, step, nil)
			return rec, outcome{}, nil
		}
		if lc == nil {
			rec, err := e.lookup(ctx, id)
			e.endLookup(ctx, step, err)
			return rec, outcome{}, err
		}
		var rec Record
		var txn Txn[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			rec, txn, err = lc.LookupClaim(ctx, id, Claim{Fingerprint: fingerprint, TTL: op.TTL, Lease: op.Lease, Generation: 1, PerRequest: e.perRequest})
			return err
		})
		e.endLookup(ctx, step, err)
		if txn == nil {
			return rec, outcome{}, err
		}
		observed(ctx).claimed(Claim{Generation: 1})
		at := &Attempt[T]{tx: txn.Tx(), id: id, secret: secret, generation: 1, perRequest: e.perRequest, fingerprint: fingerprint}
		return rec, ran(e.execute(ctx, op, txn, at.recordDerivations(txn), h)), nil
	}
	return e.decideAndClaim(ctx, op, id, fingerprint, read, func(rec Record, c Claim) (outcome, error) {
		step := e.startStep(ctx, op, StepClaim, rec.RecoveryPoint)
		var txn Txn[T]
		err := e.waitStore(ctx, func(ctx context.Context) (err error) {
			txn, err = e.store.Claim(ctx, id, c)
			return err
		})
		e.endLookup(ctx, step, err)
		if err != nil {
			return outcome{}, err
		}
		observed(ctx).claimed(c)
		at := &Attempt[T]{tx: txn.Tx(), id: id, secret: secret, generation: c.Generation, perRequest: c.PerRequest, fingerprint: fingerprint}
		return ran(e.execute(ctx, op, txn, at.recordDerivations(txn), h)), nil
	})
}

// filtered asks the store's replay filter, if it has one, for a replay
// of id with fingerprint: a hit is a completed record that the engine
// answers as a replay, as it would the store's.
func (e *Engine[T]) filtered(ctx context.Context, id ID, fingerprint []byte) (Record, bool) {
	f := e.caps.filter
	if f == nil {
		return Record{}, false
	}
	resp, res := f.FilteredReplay(ctx, id, fingerprint)
	observed(ctx).filter = res
	if res != FilterHit || resp == nil {
		return Record{}, false
	}
	return Record{Found: true, Completed: true, Fingerprint: fingerprint, Response: resp}, true
}

// outcome is what an attempt came to once it ran: the response to send,
// or the handler's error. The zero outcome is of an attempt that did not
// run.
type outcome struct {
	ran  bool
	resp *Response
	err  error
}

func ran(resp *Response, err error) outcome { return outcome{true, resp, err} }

// decideAndClaim is the protocol's one loop, for atomic and phased
// attempts alike: read the key; answer what the read decides (a replay, a
// 409 or a 422); otherwise make the claim it calls for, in the generation
// it counts, and run the attempt. A claim that loses a race
// (ErrContended), or an attempt that lost its key (errLeaseLost), reads
// the key again; a key that keeps changing gets a 409.
//
// read may run the attempt itself, as a lookup that claims a free key
// does; claim makes the claim the read called for and runs the attempt.
// Either returns the attempt's outcome once it ran, or the error of the
// store step that failed before it could.
func (e *Engine[T]) decideAndClaim(ctx context.Context, op *Operation, id ID, fingerprint []byte,
	read func() (Record, outcome, error), claim func(rec Record, c Claim) (outcome, error)) (*Response, error) {
	for range maxTries {
		rec, done, err := read()
		switch {
		case err != nil:
			return e.storeFailed(ctx, "lookup", err), nil
		case done.ran:
			return done.resp, done.err
		}
		c, resp := e.decideRecord(op, rec, fingerprint)
		if resp != nil {
			return resp, nil
		}
		c.Generation = generation(rec, c)
		// A takeover derives as its use began; a new use as this engine does.
		c.PerRequest = e.perRequest
		if c.Takeover {
			c.PerRequest = rec.PerRequest
		}
		done, err = claim(rec, c)
		switch {
		case errors.Is(err, ErrContended):
			continue
		case err != nil:
			return e.storeFailed(ctx, "claim", err), nil
		case errors.Is(done.err, errLeaseLost):
			// Decide again from what the key holds now: the attempt that
			// took over, the sweeper's answer, or a lease to take back.
			continue
		}
		return done.resp, done.err
	}
	return e.keyInUse(op, e.retryAfter), nil
}

// identify validates the request's key and finds its scope. It returns a
// response when the request is answered already: a 400 for a bad key or
// scope. An operation whose key is optional gets an ID without a key when
// the request sent none.
func (e *Engine[T]) identify(ctx context.Context, op *Operation) (ID, *Response, error) {
	r := RequestFrom(ctx)
	if r == nil {
		return ID{}, nil, errors.New("idem: no *http.Request in the context; mount the generated handler, which adds it")
	}
	observed(ctx).keyNoun = op.keyNoun()
	var key string
	var err error
	if len(op.KeyFrom) > 0 {
		key, err = op.keyOf(ctx)
	} else {
		key, err = ParseKey(r.Header.Values(HeaderKey))
	}
	switch {
	case errors.Is(err, errNoKeyValues):
		return ID{}, nil, err
	case errors.Is(err, ErrNoKey) && op.KeyOptional:
		return ID{Operation: op.Name}, nil, nil
	case errors.Is(err, ErrNoKey):
		return ID{}, e.missingKey(op), nil
	case err == nil:
		err = op.checkKey(key)
	}
	if err != nil {
		return ID{}, e.invalidKey(op, err), nil
	}
	scope, resp := e.requestScope(ctx, r, op)
	if resp != nil {
		return ID{}, resp, nil
	}
	id := ID{Scope: scope, Operation: op.Name, Key: key}
	observed(ctx).id = id
	return id, nil, nil
}

// MaxScopeLen bounds a request's scope, in bytes: a key's scope,
// operation and key together must fit the key table's index.
const MaxScopeLen = 1024

// ScopeSeparator joins the scope from Options.Scope and the one from an
// operation's ScopeHeader. Header values cannot contain it, so the join
// is unambiguous.
const ScopeSeparator = "\x1f"

// requestScope finds the request's scope from Options.Scope and the
// operation's ScopeHeader, and checks it, so that a scope the store
// cannot hold is the client's 400, not an outage.
func (e *Engine[T]) requestScope(ctx context.Context, r *http.Request, op *Operation) (string, *Response) {
	var scope string
	if e.scope != nil {
		s, err := e.scope(ctx, r)
		if err != nil {
			return "", e.scopeProblem(ctx, err)
		}
		if why := scopeInvalid(s); why != "" {
			return "", e.invalidScope(fmt.Sprintf("The request's scope %s.", why))
		}
		scope = s
	}
	if op.ScopeHeader == "" {
		return scope, nil
	}
	values := r.Header.Values(op.ScopeHeader)
	if detail := scopeHeaderInvalid(op.Name, op.ScopeHeader, values); detail != "" {
		return "", e.invalidScope(detail)
	}
	if e.scope == nil {
		return values[0], nil
	}
	joined := scope + ScopeSeparator + values[0]
	if len(joined) > MaxScopeLen {
		return "", e.invalidScope(fmt.Sprintf("The request's scope, with the %s header, is %d bytes long; the limit is %d.", op.ScopeHeader, len(joined), MaxScopeLen))
	}
	return joined, nil
}

// scopeInvalid says why s cannot be a scope, or returns "".
func scopeInvalid(s string) string {
	switch {
	case len(s) > MaxScopeLen:
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(s), MaxScopeLen)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// decideRecord applies the protocol to what a lookup read: a replay, a
// 409 or a 422 is answered from that one read; otherwise it returns the
// claim to make. The store only reports facts, so every store answers
// alike.
func (e *Engine[T]) decideRecord(op *Operation, rec Record, fingerprint []byte) (Claim, *Response) {
	c := Claim{Fingerprint: fingerprint, TTL: op.TTL, Lease: op.Lease, Attempt: rec.Attempt}
	sameRequest := bytes.Equal(rec.Fingerprint, fingerprint)
	switch {
	case rec.Found && !rec.Completed:
		// An attempt in flight keeps its key past the TTL: it may have
		// done part of its work, which only the same request may resume.
		switch {
		case !sameRequest:
			return c, e.keyReused(op)
		case rec.Held || rec.LeaseLeft > 0:
			return c, e.keyInUse(op, e.leaseRetryAfter(rec.LeaseLeft))
		}
		c.Takeover = true
		return c, nil
	case rec.Found && !rec.Expired:
		if !sameRequest {
			return c, e.keyReused(op)
		}
		replay := *rec.Response
		replay.Replayed = true
		return c, &replay
	case rec.Held:
		// An atomic attempt runs; its request is not visible before it
		// commits, so whatever this request is, it has to wait.
		return c, e.keyInUse(op, e.retryAfter)
	}
	// No row, or a completed one past its TTL: a new generation.
	return c, nil
}

// generation is the generation an attempt claimed with c after reading
// rec belongs to.
func generation(rec Record, c Claim) int64 {
	if c.Takeover {
		return rec.Generation
	}
	return rec.Generation + 1
}

// leaseRetryAfter is the Retry-After of a 409 on a leased attempt: by
// then it has finished or may be taken over.
func (e *Engine[T]) leaseRetryAfter(left time.Duration) time.Duration {
	if left <= 0 {
		return e.retryAfter
	}
	return min(left, e.maxRetryAfter)
}

// nonce stands in for the key of an attempt without one, so that its
// derived keys are unique to it.
func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails, per crypto/rand
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// derivationSecret returns the key of derived keys, reading the store's
// at the first claim. Claims racing at the start may each read it; they
// read the same secret.
func (e *Engine[T]) derivationSecret(ctx context.Context) ([]byte, error) {
	if p := e.secret.Load(); p != nil {
		return *p, nil
	}
	var secret []byte
	err := e.waitStore(ctx, func(ctx context.Context) (err error) {
		secret, err = e.store.Secret(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(secret) == 0 {
		return nil, errors.New("idem: the store's secret is empty")
	}
	e.secret.Store(&secret)
	return secret, nil
}

// waitStore runs one wait on the store, f, bounded by StoreTimeout. When
// f fails because the bound passed while the request lives on, the store
// stalled: the error says so, as an ErrStoreUnavailable.
func (e *Engine[T]) waitStore(ctx context.Context, f func(context.Context) error) error {
	bctx, cancel := context.WithTimeout(ctx, e.storeTimeout)
	defer cancel()
	err := f(bctx)
	if err != nil && ctx.Err() == nil && bctx.Err() != nil {
		return e.stalled(err)
	}
	return err
}

// stalled wraps the error of a wait on the store that StoreTimeout ended.
func (e *Engine[T]) stalled(err error) error {
	return fmt.Errorf("%w: it did not answer within %v (Options.StoreTimeout): %w", ErrStoreUnavailable, e.storeTimeout, err)
}

// lookup reads id within StoreTimeout.
func (e *Engine[T]) lookup(ctx context.Context, id ID) (rec Record, err error) {
	err = e.waitStore(ctx, func(ctx context.Context) (err error) {
		rec, err = e.store.Lookup(ctx, id)
		return err
	})
	return rec, err
}

// attemptContext is the context an attempt's handler, or a phase, runs
// in: it ends StoreTimeout past the lease, so that a statement on a
// connection that stopped answering cannot hold the request for good.
func (e *Engine[T]) attemptContext(ctx context.Context, op *Operation, at *Attempt[T]) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, at.started.Add(op.Lease+e.storeTimeout))
}

// endContext is the context an attempt ends in (its commit or rollback):
// it outlives the client, since a response the handler produced is worth
// storing even if the client has gone, but not the attempt's bound, or
// StoreTimeout from now when that is later.
func (e *Engine[T]) endContext(ctx context.Context, op *Operation, at *Attempt[T]) (context.Context, context.CancelFunc) {
	deadline := at.started.Add(op.Lease + e.storeTimeout)
	if soon := time.Now().Add(e.storeTimeout); soon.After(deadline) {
		deadline = soon
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// releaseContext is the context a phased attempt's lease is released in:
// a bound of its own, from when the release starts, since the phases
// before it may have run for longer than one lease.
func (e *Engine[T]) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.storeTimeout)
}

// overran answers an attempt, or a phase, whose handler failed after its
// context ended StoreTimeout past the lease, the request living on: a
// read of the key tells whether the store still answers. If it does, the
// work overran the lease; if not, the store stalled under it.
func (e *Engine[T]) overran(ctx context.Context, op *Operation, at *Attempt[T], step string, err error) *Response {
	if _, perr := e.lookup(ctx, at.id); perr != nil {
		return e.storeFailed(ctx, step, fmt.Errorf("%w; the attempt got no answer until its context ended %v past the lease: %v", perr, e.storeTimeout, err))
	}
	return e.attemptFailed(ctx, op, at, step, fmt.Errorf("%w: its context ended %v past the lease: %w", ErrLeaseOverrun, e.storeTimeout, err))
}

// execute runs the handler in the attempt and stores its response. A Go
// error or a panic undoes the attempt so that a retry runs again.
func (e *Engine[T]) execute(ctx context.Context, op *Operation, txn Txn[T], at *Attempt[T], h Handler[T]) (*Response, error) {
	at.started = time.Now()
	o := observed(ctx)
	defer func() { o.held += time.Since(at.started) }()
	step := e.startStep(ctx, op, StepAttempt, "")
	hctx, cancelHandler := e.attemptContext(step.ctx, op, at)
	write, err := callHandler(hctx, at, h)
	overran := err != nil && hctx.Err() != nil && ctx.Err() == nil
	cancelHandler()
	if err == nil && write == nil {
		err = fmt.Errorf("idem: %s returned neither a response nor an error", at.id.Operation)
	}
	var resp *Response
	if err == nil {
		if resp, err = Capture(write); err != nil {
			err = fmt.Errorf("idem: write %s response: %w", at.id.Operation, err)
		}
	}
	e.endStep(step, err)
	endCtx, cancel := e.endContext(ctx, op, at)
	defer cancel()
	if err != nil {
		return e.abort(ctx, endCtx, op, txn, at, err, overran)
	}
	step = e.startStep(ctx, op, StepCommit, "")
	err = txn.Complete(endCtx, resp)
	e.endStep(step, err)
	if err != nil {
		return e.attemptFailed(ctx, op, at, "complete", err), nil
	}
	o.ran = true
	return resp, nil
}

// callHandler runs h, turning a panic into a *PanicError.
func callHandler[T any](ctx context.Context, at *Attempt[T], h Handler[T]) (w Writer, err error) {
	defer func() {
		if p := recover(); p != nil {
			w, err = nil, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return h(ctx, at)
}

// abort undoes an attempt whose handler failed and returns the failure.
// When the attempt's own connection was lost, the handler's error came
// from the store going away (or from the attempt overrunning its lease),
// and the client gets an answer that says so instead of a 500; when the
// client went away, the attempt was its cancellation.
//
// overran says the handler failed after its context's deadline: see
// Engine.overran.
func (e *Engine[T]) abort(ctx, endCtx context.Context, op *Operation, txn Txn[T], at *Attempt[T], handlerErr error, overran bool) (*Response, error) {
	abortErr := txn.Abort(endCtx)
	if pe := (*PanicError)(nil); errors.As(handlerErr, &pe) && pe.Value == http.ErrAbortHandler {
		panic(http.ErrAbortHandler)
	}
	switch {
	case ctx.Err() != nil:
		return e.clientGone(ctx, "handler", handlerErr), nil
	case overran:
		return e.overran(ctx, op, at, "handler", handlerErr), nil
	case errors.Is(abortErr, ErrStoreUnavailable), errors.Is(abortErr, ErrLeaseOverrun):
		// The store ended the transaction already: the connection was
		// lost, or it sat idle past the lease.
		return e.attemptFailed(ctx, op, at, "handler", fmt.Errorf("%w (the handler failed with: %w)", abortErr, handlerErr)), nil
	case abortErr != nil:
		e.log.ErrorContext(ctx, "idem: abort attempt", "operation", at.id.Operation, "error", abortErr)
	case e.caps.classifier != nil && errors.Is(e.caps.classifier.ClassifyError(handlerErr), ErrStoreRejectedInput):
		// The database refused a value the request sent: every retry
		// would fail the same way, and the attempt left nothing behind.
		e.log.WarnContext(ctx, "idem: the database refused a value of the request", "operation", at.id.Operation, "error", handlerErr)
		observed(ctx).err = fmt.Errorf("idem: handler: %w", handlerErr)
		return e.render(&Problem{
			Type:   TypeInvalidRequest,
			Title:  "Invalid request",
			Status: http.StatusBadRequest,
			Detail: "The database refused a value of this request (too long, out of range, not of its type, or holding a character it cannot store, such as a NUL). Correct the request and send it again; it was not run, and its " + observed(ctx).key() + " was not used.",
		}), nil
	}
	return nil, handlerErr
}

// attemptFailed answers an attempt whose store step failed after it began
// holding the key. An attempt whose transaction the store ended because it
// sat idle for longer than its lease gets an answer that names the
// overrun rather than an outage: every retry would meet the same.
func (e *Engine[T]) attemptFailed(ctx context.Context, op *Operation, at *Attempt[T], step string, err error) *Response {
	if c := e.caps.classifier; c != nil && ctx.Err() == nil && !errors.Is(err, ErrLeaseOverrun) {
		// Only to find an overrun among the handler's errors: the store
		// classified its own already.
		if classified := c.ClassifyError(err); errors.Is(classified, ErrLeaseOverrun) {
			err = classified
		}
	}
	if ctx.Err() != nil || !errors.Is(err, ErrLeaseOverrun) {
		return e.storeFailed(ctx, step, err)
	}
	took := time.Since(at.started).Round(time.Millisecond)
	observed(ctx).err = fmt.Errorf("idem: %s: the attempt took %s, over its lease of %s: %w", step, took, op.Lease, err)
	detail := fmt.Sprintf("The request's work took %s, longer than operation %s's lease of %s, so its transaction was ended and nothing of it was stored. Retrying runs it again and fails the same way until the work fits the lease; the API's operators have been told.", took, op.Name, op.Lease)
	if at.point != "" {
		detail = fmt.Sprintf("A step of the request took %s, longer than operation %s's lease of %s, so its transaction was ended; the steps up to %q are kept. Retrying resumes there and fails the same way until the step fits the lease; the API's operators have been told.", took, op.Name, op.Lease, at.point)
	}
	return e.render(&Problem{
		Type:   TypeLeaseOverrun,
		Title:  "Lease overrun",
		Status: http.StatusInternalServerError,
		Detail: detail,
	})
}

// clientGone answers, for the logs alone, a request whose client went
// away: its attempt rolled back, and nothing failed.
func (e *Engine[T]) clientGone(ctx context.Context, step string, err error) *Response {
	observed(ctx).err = fmt.Errorf("idem: %s: %w", step, err)
	return e.render(&Problem{
		Type:   TypeClientClosed,
		Title:  "Client closed request",
		Status: StatusClientClosed,
		Detail: "The client closed the request before it was answered, so the request was rolled back and nothing was stored. A retry with the same " + observed(ctx).key() + " runs it again.",
	})
}

// StatusClientClosed is the status logged for a request whose client
// went away before its answer, as proxies log it; nobody receives it.
const StatusClientClosed = 499

// Problem types of the answers about the store and the attempt's end.
const (
	TypeStoreBusy           = ProblemBase + "store-busy"
	TypeCommitFailed        = ProblemBase + "commit-failed"
	TypeTransactionConflict = ProblemBase + "transaction-conflict"
	TypeLeaseOverrun        = ProblemBase + "lease-overrun"
	TypeClientClosed        = ProblemBase + "client-closed-request"
)

// storeFailed answers a request whose store step failed, by the class of
// the error (see ErrStoreUnavailable): only a store that cannot be
// reached, or has no connection free, is a 503, and only a store whose
// schema or permissions are wrong is called misconfigured.
func (e *Engine[T]) storeFailed(ctx context.Context, step string, err error) *Response {
	if ctx.Err() != nil {
		// The client went away; the store did not fail, and nobody reads
		// the answer.
		return e.clientGone(ctx, step, err)
	}
	// The Tracer's log record says what failed, once per storm.
	observed(ctx).err = fmt.Errorf("idem: %s: %w", step, err)
	switch {
	case errors.Is(err, ErrStoreBusy), errors.Is(err, ErrStoreUnavailable):
		return e.unavailable(step, err, observed(ctx).key())
	case errors.Is(err, ErrStoreRejectedInput):
		return e.render(&Problem{
			Type:   TypeInvalidRequest,
			Title:  "Invalid request",
			Status: http.StatusBadRequest,
			Detail: "The idempotency key store cannot hold this request's " + observed(ctx).key() + " or scope. Send a shorter key with plain characters; the request was not run.",
		})
	case errors.Is(err, ErrStoreMisconfigured):
		return e.render(&Problem{
			Type:   TypeStoreMisconfigured,
			Title:  "Key store misconfigured",
			Status: http.StatusInternalServerError,
			Detail: "The server's idempotency key store is misconfigured, so the request was not run. This is not a problem with the request: its operators have been told. Retrying with the same " + observed(ctx).key() + " is safe.",
		})
	case errors.Is(err, ErrTransactionConflict):
		return e.render(&Problem{
			Type:       TypeTransactionConflict,
			Title:      "Transaction conflict",
			Status:     http.StatusInternalServerError,
			Detail:     "The request's database transaction conflicted with a concurrent one (a serialization failure or a deadlock), so it was rolled back and nothing was stored. Retry after the Retry-After delay with the same " + observed(ctx).key() + ": it runs again.",
			RetryAfter: e.retryAfter,
		})
	case step == "complete" || step == "advance":
		// The attempt's own writes failed when committed, such as a
		// deferred constraint: the handler's doing, not the store's.
		return e.render(&Problem{
			Type:   TypeCommitFailed,
			Title:  "Commit failed",
			Status: http.StatusInternalServerError,
			Detail: "The request's database transaction failed when it was committed (for example a deferred constraint), so its writes were rolled back and nothing was stored. A retry with the same " + observed(ctx).key() + " runs it again; the API's operators have been told.",
		})
	}
	return e.render(&Problem{
		Type:   TypeInternal,
		Title:  "Internal error",
		Status: http.StatusInternalServerError,
		Detail: "The idempotency key store failed, so the request was not run and nothing was stored. A retry with the same " + observed(ctx).key() + " is safe; the API's operators have been told.",
	})
}

// render renders p in the API's error shape.
func (e *Engine[T]) render(p *Problem) *Response { return Render(e.problems, p) }

func (e *Engine[T]) unavailable(step string, err error, key string) *Response {
	typ, title := TypeStoreUnavailable, "Key store unavailable"
	detail := "The idempotency key store could not be reached, so the request was not run. Retry after the Retry-After delay with the same " + key + "."
	switch {
	case errors.Is(err, ErrStoreBusy):
		typ, title = TypeStoreBusy, "Key store busy"
		detail = "The idempotency key store had no connection free in time, so the request was not run. Retry after the Retry-After delay with the same " + key + "."
	case errors.Is(err, ErrCommitUnknown):
		detail = "The connection to the idempotency key store was lost while the request's result was being committed, so the request may have run. Retry after the Retry-After delay with the same " + key + ": the retry returns the request's result, and runs only what did not commit."
	case step == "handler":
		detail = "The connection to the idempotency key store was lost while the request ran, so its writes were rolled back and nothing was stored. Retry after the Retry-After delay with the same " + key + "."
	case step == "phase":
		detail = "The connection to the idempotency key store was lost during a step of the request, so that step was rolled back; the steps before it are kept. Retry after the Retry-After delay with the same " + key + ": the retry resumes where the request stopped."
	case step == "complete" || step == "advance":
		detail = "The idempotency key store failed before the request's result was committed, so its writes were rolled back and nothing was stored. Retry after the Retry-After delay with the same " + key + "."
	}
	return e.render(&Problem{
		Type:       typ,
		Title:      title,
		Status:     http.StatusServiceUnavailable,
		Detail:     detail,
		RetryAfter: e.retryAfter,
	})
}

func (e *Engine[T]) keyInUse(op *Operation, retryAfter time.Duration) *Response {
	return e.render(&Problem{
		Type:       TypeKeyInUse,
		Title:      "Idempotency-Key in use",
		Status:     http.StatusConflict,
		Detail:     fmt.Sprintf("Another request with this %s is still being processed. Retry after the Retry-After delay with the same key to get its result.", op.keyNoun()),
		RetryAfter: retryAfter,
	})
}

func (e *Engine[T]) missingKey(op *Operation) *Response {
	return e.render(missingKeyProblem(op.Name, op.KeyFrom))
}

// missingKeyProblem answers a request without the key of operation,
// which it takes from the Idempotency-Key header, or from the sources.
func missingKeyProblem(operation string, from []KeySource) *Problem {
	detail := fmt.Sprintf("Operation %s requires an Idempotency-Key header. Send a new unique key (for example a UUID) with each new request, and the same key when you retry it.", operation)
	if len(from) > 0 {
		detail = fmt.Sprintf("Operation %s takes its idempotency key from %s, which the request does not have. Send it: the same value when you retry a request, another for a new request.", operation, keySources(from))
	}
	return &Problem{
		Type:   TypeMissingKey,
		Title:  "Idempotency-Key required",
		Status: http.StatusBadRequest,
		Detail: detail,
	}
}

func (e *Engine[T]) invalidKey(op *Operation, err error) *Response {
	return e.render(invalidKeyProblem(err, op.KeyFrom, op.keyRule()))
}

// invalidKeyProblem answers a key that err refuses; rule says what keys
// the operation accepts when it takes them from the Idempotency-Key
// header, from is where it takes them from otherwise.
func invalidKeyProblem(err error, from []KeySource, rule string) *Problem {
	detail := err.Error()
	ke := (*KeyError)(nil)
	isKeyErr := errors.As(err, &ke)
	switch {
	case isKeyErr && len(from) > 0:
		detail = "The request's idempotency key, from " + keySources(from) + ", is invalid: " + ke.Reason + ". Send a value without control characters, of at most " + fmt.Sprint(MaxKeyLen) + " bytes; the request was not run."
	case isKeyErr:
		detail = "The Idempotency-Key header is invalid: " + ke.Reason + ". Send " + rule + ", optionally as a quoted string."
	default:
		detail += " Send " + rule + ", optionally as a quoted string."
	}
	return &Problem{
		Type:   TypeInvalidKey,
		Title:  "Invalid Idempotency-Key",
		Status: http.StatusBadRequest,
		Detail: detail,
	}
}

// checkKey applies the operation's own limits to a key ParseKey accepted.
func (op *Operation) checkKey(key string) error {
	switch {
	case op.KeyMaxLen > 0 && len(key) > op.KeyMaxLen:
		return &KeyError{Reason: fmt.Sprintf("the key is %d characters long; this operation's limit is %d", len(key), op.KeyMaxLen)}
	case op.KeyMinLen > 0 && len(key) < op.KeyMinLen:
		return &KeyError{Reason: fmt.Sprintf("the key is %d characters long; this operation needs at least %d", len(key), op.KeyMinLen)}
	case op.KeyPattern != nil && !op.KeyPattern.MatchString(key):
		return &KeyError{Reason: fmt.Sprintf("the key does not match this operation's pattern %s", op.KeyPattern)}
	}
	return nil
}

// keyRule says what keys the operation accepts.
func (op *Operation) keyRule() string {
	lo, hi := max(op.KeyMinLen, 1), MaxKeyLen
	if op.KeyMaxLen > 0 {
		hi = min(op.KeyMaxLen, MaxKeyLen)
	}
	rule := fmt.Sprintf("%d to %d printable ASCII characters", lo, hi)
	if op.KeyPattern != nil {
		rule += " matching " + op.KeyPattern.String()
	}
	return rule
}

func (e *Engine[T]) keyReused(op *Operation) *Response {
	return e.render(&Problem{
		Type:   TypeKeyReused,
		Title:  "Idempotency-Key reused",
		Status: http.StatusUnprocessableEntity,
		Detail: fmt.Sprintf("This %s was already used with a different request. Reuse a key only to retry the identical request; send a new key for a new request.", op.keyNoun()),
	})
}

// scopeProblem answers a request whose Scope function failed: with the
// *Problem it returned, or a 400 that keeps its error to the log, since
// the error may hold the server's internals.
func (e *Engine[T]) scopeProblem(ctx context.Context, err error) *Response {
	if p := (*Problem)(nil); errors.As(err, &p) {
		resp := e.render(p)
		resp.outcome = OutcomeInvalidScope
		return resp
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "idem: the request's scope could not be determined; answered 400", slog.String("error", err.Error()))
	return e.invalidScope("The request's scope could not be determined. Send the credentials or headers that identify your account.")
}

func (e *Engine[T]) invalidScope(detail string) *Response {
	return e.render(invalidScopeProblem(detail))
}

func invalidScopeProblem(detail string) *Problem {
	return &Problem{
		Type:   TypeInvalidScope,
		Title:  "Invalid request scope",
		Status: http.StatusBadRequest,
		Detail: detail + " The request was not run.",
	}
}

// scopeHeaderInvalid says what is wrong with the values of the header
// that scopes operation's keys, or returns "": it must be there once,
// with one value the store can hold.
func scopeHeaderInvalid(operation, header string, values []string) string {
	switch {
	case len(values) == 0 || values[0] == "":
		return fmt.Sprintf("Operation %s scopes its Idempotency-Keys by the %s header, which the request does not have. Send the %s header that identifies your account or tenant.", operation, header, header)
	case len(values) > 1:
		return fmt.Sprintf("The %s header, which scopes Idempotency-Keys, appears %d times. Send it exactly once.", header, len(values))
	case strings.Contains(values[0], ","):
		// A proxy joins repeated header lines with commas: treated as the
		// repeated lines they may have been.
		return fmt.Sprintf("The %s header, which scopes Idempotency-Keys, holds more than one value joined by a comma, as a proxy joins repeated header lines. Send it exactly once, with one value.", header)
	}
	if why := scopeInvalid(values[0]); why != "" {
		return fmt.Sprintf("The %s header, which scopes Idempotency-Keys, %s.", header, why)
	}
	return ""
}
