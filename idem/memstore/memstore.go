// Package memstore is an in-memory key store for tests and single-process
// use. It keeps keys in the process: they are lost when it exits, and it
// has no database transaction, so a handler's own writes are not atomic
// with the stored response. Its attempts hand handlers a NoTx, which makes
// that visible in the handler's signature.
package memstore

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// NoTx is the transaction of an attempt in a store without one. It has no
// methods: code written for pgx.Tx does not compile against this store.
type NoTx struct{}

// Options configure a Store; the zero value works.
type Options struct {
	// Now is the clock for TTLs; nil uses time.Now. Tests move it forward
	// to expire keys.
	Now func() time.Time
}

// Store is an in-memory key store, safe for concurrent use.
type Store struct {
	now    func() time.Time
	secret []byte
	mu     sync.Mutex
	rows   map[idem.ID]*row
	// claims are the atomic attempts in progress: like a database
	// transaction's, an atomic claim is not a row until it completes.
	claims map[idem.ID]*claim
}

var _ idem.Store[NoTx] = (*Store)(nil)

// row is a key's record: a completed response, or a phased attempt in
// flight with its lease, recovery point and fencing token.
type row struct {
	fingerprint []byte
	completed   bool
	response    *idem.Response
	expires     time.Time
	leaseUntil  time.Time
	point       string
	generation  int64
	perRequest  bool // how the use derives keys (idem.Record.PerRequest)
	attempt     int64
	// running is true while a phase runs: a live claimant holds the key.
	running bool
	// derived is true once an attempt on the key derived a key: Reap then
	// empties the row instead of deleting it, keeping its generation.
	derived bool
	// emptied marks a row Reap emptied: terminal, past its TTL, with no
	// fingerprint or response.
	emptied bool
}

// claim is an atomic attempt's hold on a key.
type claim struct {
	c       idem.Claim
	derived bool // guarded by Store.mu
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{now: opts.Now, rows: make(map[idem.ID]*row), claims: make(map[idem.ID]*claim), secret: make([]byte, 32)}
	if s.now == nil {
		s.now = time.Now
	}
	_, _ = rand.Read(s.secret) // never fails, per crypto/rand
	return s
}

// Lookup reports what the store holds for a key.
func (s *Store) Lookup(_ context.Context, id idem.ID) (idem.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.rows[id]
	rec := idem.Record{Held: s.claims[id] != nil}
	if r == nil {
		return rec, nil
	}
	rec.Found = true
	rec.Completed = r.completed || r.emptied
	rec.Held = rec.Held || r.running
	rec.Fingerprint = r.fingerprint
	rec.Expired = r.emptied || !now.Before(r.expires)
	rec.RecoveryPoint = r.point
	rec.Generation = r.generation
	rec.Attempt = r.attempt
	rec.PerRequest = r.perRequest
	rec.Response = r.response
	if !rec.Completed {
		rec.LeaseLeft = r.leaseUntil.Sub(now)
	}
	return rec, nil
}

// check reports whether the key is still as c expects: the claim the
// engine decided on after its lookup. Callers hold mu.
func (s *Store) check(id idem.ID, c idem.Claim) bool {
	if s.claims[id] != nil {
		return false
	}
	r := s.rows[id]
	if r == nil {
		return idem.Claimable(idem.RowState{}, c)
	}
	if r.running {
		return false
	}
	now := s.now()
	return idem.Claimable(idem.RowState{
		Found:       true,
		Terminal:    r.completed || r.emptied,
		Attempt:     r.attempt,
		Expired:     r.emptied || !now.Before(r.expires),
		LeasePassed: !now.Before(r.leaseUntil),
	}, c)
}

// next is the row a claim that passed check leaves, in the generation the
// engine counted: a takeover keeps the recovery point. Callers hold mu.
func (s *Store) next(id idem.ID, c idem.Claim) *row {
	now := s.now()
	old := s.rows[id]
	r := &row{fingerprint: c.Fingerprint, expires: now.Add(c.TTL), leaseUntil: now.Add(c.Lease), generation: max(c.Generation, 1), attempt: 1, perRequest: c.PerRequest}
	if old == nil {
		return r
	}
	r.attempt = old.attempt + 1
	r.derived = old.derived
	if c.Takeover {
		r.point = old.point
		r.perRequest = old.perRequest
		if now.Before(old.expires) {
			r.expires = old.expires
		}
	}
	return r
}

// Claim holds the key for an atomic attempt.
func (s *Store) Claim(_ context.Context, id idem.ID, c idem.Claim) (idem.Txn[NoTx], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.check(id, c) {
		return nil, idem.ErrContended
	}
	cl := &claim{c: c}
	s.claims[id] = cl
	return &txn{s: s, id: id, claim: cl}, nil
}

// Lease records a phased attempt in flight.
func (s *Store) Lease(_ context.Context, id idem.ID, c idem.Claim) (idem.Lease[NoTx], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.check(id, c) {
		return nil, idem.ErrContended
	}
	r := s.next(id, c)
	// A phase may derive keys before anything of it is recorded.
	r.derived = true
	s.rows[id] = r
	return &lease{s: s, id: id, r: r, attempt: r.attempt, point: r.point, lease: c.Lease}, nil
}

// Begin starts an attempt without a key.
func (s *Store) Begin(context.Context) (idem.Txn[NoTx], error) {
	return &txn{s: s}, nil
}

// Secret returns a key made for this store; derived keys need not outlive
// it, since its keys do not.
func (s *Store) Secret(context.Context) ([]byte, error) { return s.secret, nil }

// Capabilities reports none beyond idem.Store's methods: the store
// answers from memory, with nothing to save or filter.
func (s *Store) Capabilities() idem.Capabilities { return idem.Capabilities{} }

// Reap ends the completed keys whose TTL has passed, as the Postgres
// store's reaper does: a key whose attempts derived no key is deleted; one
// whose attempts did is emptied, keeping its generation, so that its next
// use derives keys never used before. It returns how many of each.
func (s *Store) Reap() (deleted, emptied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, r := range s.rows {
		switch {
		case !r.completed || now.Before(r.expires):
		case r.derived:
			r.completed, r.emptied, r.fingerprint, r.response = false, true, nil, nil
			emptied++
		default:
			delete(s.rows, id)
			deleted++
		}
	}
	return deleted, emptied
}

// Len reports how many keys the store holds, expired ones included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// txn is an atomic attempt, or one without a key (claim nil).
type txn struct {
	s     *Store
	id    idem.ID
	claim *claim
}

func (t *txn) Tx() NoTx { return NoTx{} }

func (t *txn) Complete(_ context.Context, resp *idem.Response) error {
	if t.claim == nil {
		return nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.claims[t.id] != t.claim {
		return idem.ErrLeaseLost
	}
	delete(t.s.claims, t.id)
	r := t.s.next(t.id, t.claim.c)
	r.completed, r.response = true, resp
	r.derived = r.derived || t.claim.derived
	t.s.rows[t.id] = r
	return nil
}

// RecordDerivation notes that the attempt derived a key.
func (t *txn) RecordDerivation() {
	if t.claim == nil {
		return
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.claim.derived = true
}

func (t *txn) Abort(context.Context) error {
	if t.claim == nil {
		return nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.claims[t.id] == t.claim {
		delete(t.s.claims, t.id)
	}
	return nil
}

// lease is a phased attempt's hold on a row.
type lease struct {
	s       *Store
	id      idem.ID
	r       *row
	attempt int64
	point   string
	lease   time.Duration
}

func (l *lease) RecoveryPoint() string { return l.point }

// owned reports whether the key is still this attempt's: a takeover or a
// new claim after the TTL puts a new row in its place. Callers hold mu.
func (l *lease) owned() bool {
	return l.s.rows[l.id] == l.r && !l.r.completed && l.r.attempt == l.attempt
}

func (l *lease) Phase(context.Context) (idem.Phase[NoTx], error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.owned() {
		return nil, idem.ErrLeaseLost
	}
	l.r.running = true
	l.r.leaseUntil = l.s.now().Add(l.lease)
	return &phase{l: l}, nil
}

func (l *lease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.owned() {
		l.r.running = false
		l.r.leaseUntil = l.s.now()
	}
	return nil
}

// phase is one phase of a phased attempt. The store has no transaction to
// roll back: only the recovery point and the response are recorded.
type phase struct{ l *lease }

func (p *phase) Tx() NoTx { return NoTx{} }

func (p *phase) Advance(_ context.Context, point string) error {
	p.l.s.mu.Lock()
	defer p.l.s.mu.Unlock()
	if !p.l.owned() {
		return idem.ErrLeaseLost
	}
	p.l.r.point = point
	p.l.r.running = false
	return nil
}

func (p *phase) Complete(_ context.Context, resp *idem.Response) error {
	p.l.s.mu.Lock()
	defer p.l.s.mu.Unlock()
	if !p.l.owned() {
		return idem.ErrLeaseLost
	}
	p.l.r.completed, p.l.r.running, p.l.r.response = true, false, resp
	return nil
}

func (p *phase) Abort(context.Context) error {
	p.l.s.mu.Lock()
	defer p.l.s.mu.Unlock()
	if p.l.owned() {
		p.l.r.running = false
	}
	return nil
}
