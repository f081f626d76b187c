package history_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
	"github.com/idemgen/idemgen/internal/history"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/redistest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	seedFlag = flag.Uint64("history.seed", 0, "the seed of TestHistory's requests (default: $IDEMGEN_HISTORY_SEED, else random)")
	longFlag = flag.Bool("history.long", false, "run TestHistory long: more clients, more requests, slow phases (also: IDEMGEN_HISTORY=long)")
)

// config is the run the flags and environment ask for.
func config(t *testing.T) history.Config {
	cfg, err := history.FromEnv(*seedFlag, *longFlag)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// check runs the checker and reports what it found, with the seed that
// plans the same requests again.
func check(t *testing.T, hist *history.History, cfg history.Config) {
	t.Helper()
	t.Log(hist.Summary())
	bad := hist.Check()
	for i, b := range bad {
		if i == 20 {
			t.Errorf("... and %d more", len(bad)-i)
			break
		}
		t.Error(b)
	}
	if len(bad) > 0 {
		t.Errorf("seed %d: rerun with -history.seed %d (or IDEMGEN_HISTORY_SEED=%d)", cfg.Seed, cfg.Seed, cfg.Seed)
	}
}

// TestHistory runs the history checker against each store: the in-memory
// one, and PostgreSQL with a pool of four connections and of one. The
// pool of one also caches a single prepared statement, so that statements
// are prepared again all the time, in whatever state the transaction is.
func TestHistory(t *testing.T) {
	cfg := config(t)
	t.Logf("seed %d", cfg.Seed)
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		check(t, history.Run(t, memHarness(), cfg), cfg)
	})
	for _, size := range []int32{4, 1} {
		t.Run(fmt.Sprintf("pgstore/MaxConns=%d", size), func(t *testing.T) {
			t.Parallel()
			check(t, history.Run(t, pgHarness(t, size, false, false), cfg), cfg)
		})
	}
	// A database that stops answering now and then, without closing
	// anything: requests caught in it get 503s within the engine's bound.
	t.Run("pgstore/stalls", func(t *testing.T) {
		t.Parallel()
		check(t, history.Run(t, pgHarness(t, 4, false, true), cfg), cfg)
	})
	t.Run("pgstore+redis/MaxConns=4", func(t *testing.T) {
		t.Parallel()
		h := pgHarness(t, 4, true, false)
		hits := &filterHits{}
		h.Tracer = hits
		check(t, history.Run(t, h, cfg), cfg)
		t.Logf("%d replays answered by Redis", hits.n.Load())
		if hits.n.Load() == 0 {
			t.Error("Redis answered no replay: the filter was not tried")
		}
	})
}

// filterHits counts the replays the replay filter answered.
type filterHits struct{ n atomic.Int64 }

func (h *filterHits) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}

func (h *filterHits) TraceRequestEnd(_ context.Context, d idem.TraceRequestEndData) {
	if d.Filter == idem.FilterHit {
		h.n.Add(1)
	}
}

// memHarness is the in-memory store on a clock the checker moves: ageing
// one key moves it past every TTL, and a lease past every lease, so it is
// done on one call in four.
func memHarness() history.Harness[memstore.NoTx] {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	store := memstore.New(memstore.Options{Now: now})
	var mu sync.Mutex
	var effects []history.Effect
	var calls atomic.Int64
	every4 := func(d time.Duration) func(testing.TB, idem.ID) {
		return func(testing.TB, idem.ID) {
			if calls.Add(1)%4 == 0 {
				offset.Add(int64(d))
			}
		}
	}
	return history.Harness[memstore.NoTx]{
		Store: store,
		Effect: func(_ context.Context, _ *idem.Attempt[memstore.NoTx], e history.Effect) error {
			mu.Lock()
			defer mu.Unlock()
			effects = append(effects, e)
			return nil
		},
		Committed: func(testing.TB) []history.Effect {
			mu.Lock()
			defer mu.Unlock()
			return append([]history.Effect(nil), effects...)
		},
		Age:      every4(time.Hour + time.Second),
		AgeLease: every4(2 * time.Second),
		Reap:     func(testing.TB) { store.Reap() },
		Now:      now,
	}
}

// pgHarness is the Postgres store on a fresh database and a pool of size
// connections; with filtered, behind a Redis replay filter; with stalls,
// connected through a proxy that stops forwarding now and then.
func pgHarness(t *testing.T, size int32, filtered, stalls bool) history.Harness[pgx.Tx] {
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = size
	if size == 1 {
		cfg.ConnConfig.StatementCacheCapacity = 1
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if err := idemriver.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	direct := pool
	var opts history.PostgresOptions
	if stalls {
		// A connection opened into a partition gives up after a second,
		// as a pool's connect_timeout makes it.
		opts.Admin = pool
		opts.Proxy, pool = pgtest.Proxied(t, pool, func(cfg *pgxpool.Config) {
			cfg.MaxConns, cfg.ConnConfig.ConnectTimeout = size, time.Second
		})
		// As long as the lease: a statement a loaded machine slows that
		// much gets a 503 the checker takes as the truth it is (see
		// Check), and stalls of up to 1.5s still outlast it.
		opts.StoreTimeout = time.Second
	}
	if filtered {
		rdb, prefix := redistest.Client(t)
		// A timeout no loaded machine reaches: the run asserts that Redis
		// answered replays, and the tests of idem/pgstore cover a slow one.
		cache, err := redisfilter.New(rdb, redisfilter.Options{Prefix: prefix, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		opts.Store.ReplayCache = cache
		opts.Cache, opts.CachePrefix = rdb, prefix
		opts.Expire = func(t testing.TB, id idem.ID) {
			// Its entries, under whatever epoch they were written.
			keys, err := rdb.Keys(context.Background(), prefix+pgstore.FilterKey(id)+"*").Result()
			if err == nil && len(keys) > 0 {
				err = rdb.Del(context.Background(), keys...).Err()
			}
			if err != nil {
				t.Errorf("expire %v in Redis: %v", id, err)
			}
		}
		t.Cleanup(func() {
			keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
			if len(keys) > 0 {
				_ = rdb.Del(context.Background(), keys...).Err()
			}
		})
	}
	h := history.Postgres(t, pool, opts)
	// Async requests too, on River workers that die now and then.
	history.WithRiver(t, &h, direct, opts.Store)
	return h
}
