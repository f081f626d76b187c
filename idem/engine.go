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
	"runtime/debug"
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
	// count towards the fingerprint.
	FingerprintExclude []string
	// RecoveryPoints are the points of a phased operation, in order; see
	// Engine.ServePhased.
	RecoveryPoints []string
	// ScopeHeader names a request header whose value scopes the keys, as
	// the spec's scope: {header: NAME} says: a request without it gets a
	// 400 problem naming it. With Options.Scope also set, a key's scope
	// is both (see Options.Scope).
	ScopeHeader string
}

// Options configure an Engine. The zero value works: one scope for all
// requests, the default logger, Retry-After of one second.
type Options struct {
	// Scope returns the scope of a request, such as its tenant or
	// authenticated principal; keys never cross scopes. ctx is the
	// request's context as the strict middlewares left it, so a principal
	// an auth middleware stored there is visible; r is the HTTP request.
	// It may return a *Problem to choose the answer; other errors answer
	// 400. A scope must be valid UTF-8 without NUL bytes and at most
	// MaxScopeLen bytes long, or the request gets a 400 invalid-scope
	// problem. When the operation also has a ScopeHeader, the key's scope
	// is this one and the header's value, joined by ScopeSeparator.
	Scope func(ctx context.Context, r *http.Request) (string, error)
	// Logger receives errors and claim events; nil uses slog.Default().
	Logger *slog.Logger
	// RetryAfter is sent with 409 and 503 answers; zero means one second.
	RetryAfter time.Duration
	// Secret keys the derived keys of attempts (Attempt.DerivedKey). Nil
	// uses the store's own secret, which its migrations create; set it to
	// share derived keys across stores.
	Secret []byte
}

// Engine runs requests of annotated operations through the protocol.
type Engine[T any] struct {
	store      Store[T]
	scope      func(context.Context, *http.Request) (string, error)
	log        *slog.Logger
	retryAfter time.Duration

	secret atomic.Pointer[[]byte] // read from the store at the first claim
}

// NewEngine returns an engine on store.
func NewEngine[T any](store Store[T], opts Options) *Engine[T] {
	e := &Engine[T]{store: store, scope: opts.Scope, log: opts.Logger, retryAfter: opts.RetryAfter}
	if opts.Secret != nil {
		e.secret.Store(&opts.Secret)
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.retryAfter <= 0 {
		e.retryAfter = time.Second
	}
	return e
}

// Attempt is one execution of an annotated operation's handler, holding
// the key; in a phased operation, one phase of it. T is the store's
// transaction type.
type Attempt[T any] struct {
	tx     T
	id     ID
	point  string
	secret []byte
	nonce  string // the key of derived keys when the request sent none
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
// takeover of this request's key, different for every other key, scope,
// operation and name, and not computable by the client. For a request
// sent without a key (its operation's key is optional) it is random.
func (a *Attempt[T]) DerivedKey(name string) string {
	key := a.id.Key
	if key == "" {
		key = "\x00" + a.nonce // no valid Idempotency-Key starts with a NUL
	}
	m := hmac.New(sha256.New, a.secret)
	for _, s := range []string{"idemgen derived key v1", a.id.Scope, a.id.Operation, key, name} {
		var n [binary.MaxVarintLen64]byte
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		m.Write([]byte(s))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

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
	id, resp, err := e.identify(ctx, op)
	if resp != nil || err != nil {
		return resp, err
	}
	if id.Key == "" {
		secret, err := e.derivationSecret(ctx)
		if err != nil {
			return e.unavailable(ctx, id, "secret", err), nil
		}
		txn, err := e.store.Begin(ctx)
		if err != nil {
			return e.unavailable(ctx, id, "begin", err), nil
		}
		return e.execute(ctx, txn, &Attempt[T]{tx: txn.Tx(), id: id, secret: secret, nonce: nonce()}, h)
	}
	for range maxTries {
		rec, resp := e.lookup(ctx, id, fingerprint)
		if resp != nil {
			return resp, nil
		}
		// Read only now, so that replays, 409s and 422s never wait for it.
		secret, err := e.derivationSecret(ctx)
		if err != nil {
			return e.unavailable(ctx, id, "secret", err), nil
		}
		txn, err := e.store.Claim(ctx, id, Claim{Fingerprint: fingerprint, TTL: op.TTL, Lease: op.Lease})
		if errors.Is(err, ErrContended) {
			continue
		}
		if err != nil {
			return e.unavailable(ctx, id, "claim", err), nil
		}
		if rec.State == Abandoned {
			e.log.InfoContext(ctx, "idem: took over an abandoned attempt", "operation", id.Operation, "scope", id.Scope, "recovery_point", rec.RecoveryPoint)
		}
		return e.execute(ctx, txn, &Attempt[T]{tx: txn.Tx(), id: id, secret: secret}, h)
	}
	return e.keyInUse(), nil
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
	key, err := ParseKey(r.Header.Values(HeaderKey))
	switch {
	case errors.Is(err, ErrNoKey) && op.KeyOptional:
		return ID{Operation: op.Name}, nil, nil
	case errors.Is(err, ErrNoKey):
		return ID{}, missingKey(op), nil
	case err != nil:
		return ID{}, invalidKey(err), nil
	}
	scope, resp := e.requestScope(ctx, r, op)
	if resp != nil {
		return ID{}, resp, nil
	}
	return ID{Scope: scope, Operation: op.Name, Key: key}, nil, nil
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
			return "", scopeProblem(err)
		}
		if why := scopeInvalid(s); why != "" {
			return "", invalidScope(fmt.Sprintf("The request's scope %s.", why))
		}
		scope = s
	}
	if op.ScopeHeader == "" {
		return scope, nil
	}
	values := r.Header.Values(op.ScopeHeader)
	switch {
	case len(values) == 0 || values[0] == "":
		return "", invalidScope(fmt.Sprintf("Operation %s scopes its Idempotency-Keys by the %s header, which the request does not have. Send the %s header that identifies your account or tenant.", op.Name, op.ScopeHeader, op.ScopeHeader))
	case len(values) > 1:
		return "", invalidScope(fmt.Sprintf("The %s header, which scopes Idempotency-Keys, appears %d times. Send it exactly once.", op.ScopeHeader, len(values)))
	}
	if why := scopeInvalid(values[0]); why != "" {
		return "", invalidScope(fmt.Sprintf("The %s header, which scopes Idempotency-Keys, %s.", op.ScopeHeader, why))
	}
	if e.scope == nil {
		return values[0], nil
	}
	joined := scope + ScopeSeparator + values[0]
	if len(joined) > MaxScopeLen {
		return "", invalidScope(fmt.Sprintf("The request's scope, with the %s header, is %d bytes long; the limit is %d.", op.ScopeHeader, len(joined), MaxScopeLen))
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

// lookup reads the key and answers a replay, a 409 or a 422 from that one
// read. A nil response means the key may be claimed.
func (e *Engine[T]) lookup(ctx context.Context, id ID, fingerprint []byte) (Record, *Response) {
	rec, err := e.store.Lookup(ctx, id)
	if err != nil {
		return rec, e.unavailable(ctx, id, "lookup", err)
	}
	if rec.Fingerprint != nil && !bytes.Equal(rec.Fingerprint, fingerprint) {
		return rec, keyReused()
	}
	switch rec.State {
	case Busy:
		return rec, e.keyInUse()
	case Completed:
		replay := *rec.Response
		replay.Replayed = true
		return rec, &replay
	}
	return rec, nil
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
	secret, err := e.store.Secret(ctx)
	if err != nil {
		return nil, err
	}
	if len(secret) == 0 {
		return nil, errors.New("idem: the store's secret is empty")
	}
	e.secret.Store(&secret)
	return secret, nil
}

// execute runs the handler in the attempt and stores its response. A Go
// error or a panic undoes the attempt so that a retry runs again.
func (e *Engine[T]) execute(ctx context.Context, txn Txn[T], at *Attempt[T], h Handler[T]) (resp *Response, err error) {
	// The attempt ends whatever the client does: a response the handler
	// produced is worth storing even if the client has gone.
	endCtx := context.WithoutCancel(ctx)
	ended := false
	defer func() {
		if ended {
			return
		}
		p := recover()
		if abortErr := txn.Abort(endCtx); abortErr != nil {
			e.log.ErrorContext(ctx, "idem: abort attempt", "operation", at.id.Operation, "error", abortErr)
		}
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p)
		}
		err = &PanicError{Value: p, Stack: debug.Stack()}
		resp = nil
	}()

	write, err := h(ctx, at)
	if err != nil {
		if e.storeDown(err) {
			return e.unavailable(ctx, at.id, "handler", err), nil
		}
		return nil, err
	}
	if write == nil {
		return nil, fmt.Errorf("idem: %s returned neither a response nor an error", at.id.Operation)
	}
	resp, err = Capture(write)
	if err != nil {
		return nil, fmt.Errorf("idem: write %s response: %w", at.id.Operation, err)
	}
	// Complete ends the transaction, committed or not.
	ended = true
	if err := txn.Complete(endCtx, resp); err != nil {
		// Complete failed, so the transaction with the handler's writes did
		// not commit: the client may safely retry.
		return e.unavailable(ctx, at.id, "complete", err), nil
	}
	return resp, nil
}

// storeDown reports whether a handler's error comes from the store's
// database being unreachable; see ErrorClassifier.
func (e *Engine[T]) storeDown(err error) bool {
	c, ok := e.store.(ErrorClassifier)
	return ok && c.Unavailable(err)
}

func (e *Engine[T]) unavailable(ctx context.Context, id ID, step string, err error) *Response {
	if ctx.Err() != nil {
		// The client went away; the store did not fail.
		e.log.InfoContext(ctx, "idem: request canceled", "step", step, "operation", id.Operation, "error", err)
	} else {
		e.log.ErrorContext(ctx, "idem: key store failed", "step", step, "operation", id.Operation, "error", err)
	}
	return (&Problem{
		Type:       TypeStoreUnavailable,
		Title:      "Key store unavailable",
		Status:     http.StatusServiceUnavailable,
		Detail:     "The idempotency key store could not be reached, so the request was not run. Retry after the Retry-After delay with the same Idempotency-Key.",
		RetryAfter: e.retryAfter,
	}).Response()
}

func (e *Engine[T]) keyInUse() *Response {
	return (&Problem{
		Type:       TypeKeyInUse,
		Title:      "Idempotency-Key in use",
		Status:     http.StatusConflict,
		Detail:     "Another request with this Idempotency-Key is still being processed. Retry after the Retry-After delay with the same key to get its result.",
		RetryAfter: e.retryAfter,
	}).Response()
}

func missingKey(op *Operation) *Response {
	return (&Problem{
		Type:   TypeMissingKey,
		Title:  "Idempotency-Key required",
		Status: http.StatusBadRequest,
		Detail: fmt.Sprintf("Operation %s requires an Idempotency-Key header. Send a new unique key (for example a UUID) with each new request, and the same key when you retry it.", op.Name),
	}).Response()
}

func invalidKey(err error) *Response {
	detail := err.Error()
	if ke, ok := errors.AsType[*KeyError](err); ok {
		detail = "The Idempotency-Key header is invalid: " + ke.Reason + "."
	}
	return (&Problem{
		Type:   TypeInvalidKey,
		Title:  "Invalid Idempotency-Key",
		Status: http.StatusBadRequest,
		Detail: detail + " Send 1 to 255 printable ASCII characters, optionally as a quoted string.",
	}).Response()
}

func keyReused() *Response {
	return (&Problem{
		Type:   TypeKeyReused,
		Title:  "Idempotency-Key reused",
		Status: http.StatusUnprocessableEntity,
		Detail: "This Idempotency-Key was already used with a different request. Reuse a key only to retry the identical request; send a new key for a new request.",
	}).Response()
}

func scopeProblem(err error) *Response {
	if p, ok := errors.AsType[*Problem](err); ok {
		return p.Response()
	}
	return invalidScope("The request's scope could not be determined: " + err.Error() + ". Send the credentials or headers that identify your account.")
}

func invalidScope(detail string) *Response {
	return (&Problem{
		Type:   TypeInvalidScope,
		Title:  "Invalid request scope",
		Status: http.StatusBadRequest,
		Detail: detail + " The request was not run.",
	}).Response()
}
