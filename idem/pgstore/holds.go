package pgstore

import (
	"sync"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// holds records the keys this store's attempts hold while each holds a
// connection: an atomic attempt from its claim to its end, a phase from
// its start to its commit. When every connection of the pool is taken (a
// pool of one connection, or attempts filling a small one), a duplicate
// could not read its key until one came free, and would be answered 503
// store-busy; what this process knows of its own attempts answers it at
// once instead, as the key's row and lock would: 409, or 422 for another
// request under a phased key. The database stays the arbiter whenever it
// can be read.
type holds struct {
	mu sync.Mutex
	m  map[int64]*hold
}

// hold is one attempt's hold on a key.
type hold struct {
	// fingerprint is a phased attempt's, whose request its row shows; nil
	// for an atomic attempt, whose request is not visible before it
	// commits.
	fingerprint []byte
	until       time.Time // the end of its lease
}

// add records h on lock until the returned function removes it.
func (hs *holds) add(lock int64, h *hold) (remove func()) {
	hs.mu.Lock()
	if hs.m == nil {
		hs.m = map[int64]*hold{}
	}
	hs.m[lock] = h
	hs.mu.Unlock()
	return func() {
		hs.mu.Lock()
		if hs.m[lock] == h {
			delete(hs.m, lock)
		}
		hs.mu.Unlock()
	}
}

// record is what the key's row and lock would say of a key this process
// holds, and false when it holds none, or its lease has passed.
func (hs *holds) record(lock int64, now time.Time) (idem.Record, bool) {
	hs.mu.Lock()
	h := hs.m[lock]
	hs.mu.Unlock()
	if h == nil || !now.Before(h.until) {
		return idem.Record{}, false
	}
	if h.fingerprint == nil {
		return idem.Record{Held: true}, true
	}
	return idem.Record{Found: true, Held: true, Fingerprint: h.fingerprint, LeaseLeft: h.until.Sub(now)}, true
}

// heldHere answers a lookup of the key whose lock ID is lock from this
// process's own attempts when
// the pool has no connection free, and false otherwise: the lookup then
// reads the key.
func (s *Store) heldHere(lock int64) (idem.Record, bool) {
	if s.pool == nil {
		return idem.Record{}, false
	}
	rec, ok := s.holds.record(lock, time.Now())
	if !ok {
		return idem.Record{}, false
	}
	if st := s.pool.Stat(); st.IdleConns() > 0 || st.TotalConns() < st.MaxConns() {
		return idem.Record{}, false
	}
	return rec, true
}
