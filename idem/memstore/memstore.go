// Package memstore is an in-memory key store for tests and single-process
// use. It keeps keys in the process: they are lost when it exits, and it
// has no database transaction, so a handler's own writes are not atomic
// with the stored response. Its attempts hand handlers a NoTx, which makes
// that visible in the handler's signature.
package memstore

import (
	"bytes"
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
	keys   map[idem.ID]*entry
}

var _ idem.Store[NoTx] = (*Store)(nil)

type entry struct {
	fingerprint []byte
	inFlight    bool
	response    *idem.Response
	expires     time.Time

	// A phased attempt's lease, recovery point and fencing token. An
	// atomic attempt runs in this process and cannot die without it, so
	// only a phased one is ever abandoned: by Release, after a handler
	// error, or when its lease passes while no phase runs.
	phased     bool
	running    bool
	leaseUntil time.Time
	point      string
	attempt    int
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{now: opts.Now, keys: make(map[idem.ID]*entry), secret: make([]byte, 32)}
	if s.now == nil {
		s.now = time.Now
	}
	_, _ = rand.Read(s.secret) // never fails, per crypto/rand
	return s
}

// Lookup reads a key.
func (s *Store) Lookup(_ context.Context, id idem.ID) (idem.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(id)
	switch {
	case e == nil:
		return idem.Record{State: idem.Absent}, nil
	case e.inFlight && s.abandoned(e):
		return idem.Record{State: idem.Abandoned, Fingerprint: e.fingerprint, RecoveryPoint: e.point}, nil
	case e.inFlight:
		return idem.Record{State: idem.Busy, Fingerprint: e.fingerprint, RecoveryPoint: e.point}, nil
	default:
		return idem.Record{State: idem.Completed, Fingerprint: e.fingerprint, Response: e.response}, nil
	}
}

// live returns the key's entry unless its TTL has passed. An attempt in
// flight keeps its key however long it runs. Callers hold mu.
func (s *Store) live(id idem.ID) *entry {
	e := s.keys[id]
	if e != nil && !e.inFlight && !s.now().Before(e.expires) {
		delete(s.keys, id)
		return nil
	}
	return e
}

// abandoned reports whether an in-flight entry may be taken over. Callers
// hold mu.
func (s *Store) abandoned(e *entry) bool {
	return e.phased && !e.running && !s.now().Before(e.leaseUntil)
}

// claim records a new attempt on the key: a new entry, a replacement of an
// abandoned one whose TTL has passed, or a takeover of an abandoned one
// with the same fingerprint, which keeps its recovery point. Callers hold
// mu.
func (s *Store) claim(id idem.ID, c idem.Claim, phased bool) (*entry, error) {
	now := s.now()
	old := s.live(id)
	e := &entry{fingerprint: c.Fingerprint, inFlight: true, expires: now.Add(c.TTL), phased: phased, leaseUntil: now.Add(c.Lease), attempt: 1}
	switch {
	case old == nil:
	case !old.inFlight || !s.abandoned(old):
		return nil, idem.ErrContended
	case !now.Before(old.expires):
		e.attempt = old.attempt + 1
	case bytes.Equal(old.fingerprint, c.Fingerprint):
		e.point, e.attempt, e.expires = old.point, old.attempt+1, old.expires
	default:
		return nil, idem.ErrContended
	}
	s.keys[id] = e
	return e, nil
}

// Claim marks the key in flight.
func (s *Store) Claim(_ context.Context, id idem.ID, c idem.Claim) (idem.Txn[NoTx], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.claim(id, c, false)
	if err != nil {
		return nil, err
	}
	return &txn{s: s, id: id, e: e}, nil
}

// Lease marks the key in flight for a phased attempt.
func (s *Store) Lease(_ context.Context, id idem.ID, c idem.Claim) (idem.Lease[NoTx], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.claim(id, c, true)
	if err != nil {
		return nil, err
	}
	return &lease{s: s, id: id, e: e, attempt: e.attempt, point: e.point, lease: c.Lease}, nil
}

// Begin starts an attempt without a key.
func (s *Store) Begin(context.Context) (idem.Txn[NoTx], error) {
	return &txn{s: s}, nil
}

// Secret returns a key made for this store; derived keys need not outlive
// it, since its keys do not.
func (s *Store) Secret(context.Context) ([]byte, error) { return s.secret, nil }

// Len reports how many keys the store holds, expired ones included until
// they are next read.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

type txn struct {
	s  *Store
	id idem.ID
	e  *entry // nil for a keyless attempt
}

func (t *txn) Tx() NoTx { return NoTx{} }

func (t *txn) Complete(_ context.Context, r *idem.Response) error {
	if t.e == nil {
		return nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.e.inFlight = false
	t.e.response = r
	return nil
}

func (t *txn) Abort(context.Context) error {
	if t.e == nil {
		return nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.keys[t.id] == t.e {
		delete(t.s.keys, t.id)
	}
	return nil
}

// lease is a phased attempt's hold on an entry.
type lease struct {
	s       *Store
	id      idem.ID
	e       *entry
	attempt int
	point   string
	lease   time.Duration
}

func (l *lease) RecoveryPoint() string { return l.point }

// owned reports whether the key is still this attempt's: a takeover or a
// new claim after the TTL puts a new entry in its place. Callers hold mu.
func (l *lease) owned() bool {
	return l.s.keys[l.id] == l.e && l.e.inFlight && l.e.attempt == l.attempt
}

func (l *lease) Phase(context.Context) (idem.Phase[NoTx], error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.owned() {
		return nil, idem.ErrLeaseLost
	}
	l.e.running = true
	l.e.leaseUntil = l.s.now().Add(l.lease)
	return &phase{l: l}, nil
}

func (l *lease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.owned() {
		l.e.running = false
		l.e.leaseUntil = l.s.now()
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
	p.l.e.point = point
	p.l.e.running = false
	return nil
}

func (p *phase) Complete(_ context.Context, r *idem.Response) error {
	p.l.s.mu.Lock()
	defer p.l.s.mu.Unlock()
	if !p.l.owned() {
		return idem.ErrLeaseLost
	}
	p.l.e.inFlight, p.l.e.running, p.l.e.response = false, false, r
	return nil
}

func (p *phase) Abort(context.Context) error {
	p.l.s.mu.Lock()
	defer p.l.s.mu.Unlock()
	if p.l.owned() {
		p.l.e.running = false
	}
	return nil
}
