package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/idemgen/idemgen/idem/storetest"
)

// clock is a test clock that only moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness[memstore.NoTx] {
		c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		store := memstore.New(memstore.Options{Now: c.Now})
		return storetest.Harness[memstore.NoTx]{
			Store: store,
			Reap:  func(*testing.T) { store.Reap() },
			// Every key in the suite lives an hour; move past it.
			Expire: func(*testing.T, idem.ID) { c.Add(time.Hour) },
			// And its leases a minute.
			ExpireLease: func(*testing.T, idem.ID) { c.Add(time.Minute) },
		}
	})
}

func TestDerivedKeyDiffersPerRequest(t *testing.T) {
	storetest.DerivedKeyDiffersPerRequest(t, func(t *testing.T) storetest.Harness[memstore.NoTx] {
		return storetest.Harness[memstore.NoTx]{Store: memstore.New(memstore.Options{})}
	})
}
