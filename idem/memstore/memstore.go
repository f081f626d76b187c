// Package memstore is an in-memory key store for tests and single-process
// use. It keeps keys in the process: they are lost when it exits, and it
// has no database transaction, so a handler's own writes are not atomic
// with the stored response. Its attempts hand handlers a NoTx, which makes
// that visible in the handler's signature.
package memstore

import (
	"context"
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
	now  func() time.Time
	mu   sync.Mutex
	keys map[idem.ID]*entry
}

var _ idem.Store[NoTx] = (*Store)(nil)

type entry struct {
	fingerprint []byte
	inFlight    bool
	response    *idem.Response
	expires     time.Time
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{now: opts.Now, keys: make(map[idem.ID]*entry)}
	if s.now == nil {
		s.now = time.Now
	}
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
	case e.inFlight:
		// An attempt in this process is running: it cannot have died
		// without the process, so its claim never lapses into Abandoned.
		return idem.Record{State: idem.Busy, Fingerprint: e.fingerprint}, nil
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

// Claim marks the key in flight.
func (s *Store) Claim(_ context.Context, id idem.ID, c idem.Claim) (idem.Txn[NoTx], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live(id) != nil {
		return nil, idem.ErrContended
	}
	e := &entry{fingerprint: c.Fingerprint, inFlight: true, expires: s.now().Add(c.TTL)}
	s.keys[id] = e
	return &txn{s: s, id: id, e: e}, nil
}

// Begin starts an attempt without a key.
func (s *Store) Begin(context.Context) (idem.Txn[NoTx], error) {
	return &txn{s: s}, nil
}

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
