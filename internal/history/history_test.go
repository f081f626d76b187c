package history_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/history"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	seedFlag = flag.Uint64("history.seed", 0, "the seed of TestHistory's requests (default: $IDEMGEN_HISTORY_SEED, else random)")
	longFlag = flag.Bool("history.long", false, "run TestHistory long: more clients, more requests, slow phases (also: IDEMGEN_HISTORY=long)")
)

// config is the run the flags and environment ask for.
func config(t *testing.T) history.Config {
	seed := *seedFlag
	if s := os.Getenv("IDEMGEN_HISTORY_SEED"); seed == 0 && s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("IDEMGEN_HISTORY_SEED=%q: %v", s, err)
		}
		seed = n
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	cfg := history.Config{Seed: seed}
	if *longFlag || os.Getenv("IDEMGEN_HISTORY") == "long" {
		cfg.Clients, cfg.Requests, cfg.Slow = 12, 400, true
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
			check(t, history.Run(t, pgHarness(t, size), cfg), cfg)
		})
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

// pgHarness is the Postgres store on a pool of size connections, with the
// handlers' effects in a table of their own, written in the attempts'
// transactions.
func pgHarness(t *testing.T, size int32) history.Harness[pgx.Tx] {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = size
	if size == 1 {
		cfg.ConnConfig.StatementCacheCapacity = 1
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (scope text, operation text, key text, generation bigint, phase text, token text)`); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	store := pgstore.New(pool, pgstore.Options{})
	var kills atomic.Int64
	// age changes a key's row unless a phase holds it, as the clock would
	// between phases; the checker never waits for a running phase.
	age := func(column string) func(testing.TB, idem.ID) {
		sql := `UPDATE idempotency_keys SET ` + column + ` = now() - interval '1 second'
			WHERE (scope, operation, key) IN (SELECT scope, operation, key FROM idempotency_keys
				WHERE scope = $1 AND operation = $2 AND key = $3 FOR UPDATE SKIP LOCKED)`
		return func(t testing.TB, id idem.ID) {
			if _, err := pool.Exec(ctx, sql, id.Scope, id.Operation, id.Key); err != nil {
				t.Errorf("age %s of %v: %v", column, id, err)
			}
		}
	}
	return history.Harness[pgx.Tx]{
		Store:         store,
		Transactional: true,
		Effect: func(ctx context.Context, at *idem.Attempt[pgx.Tx], e history.Effect) error {
			_, err := at.Tx().Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3, $4, $5, $6)`, e.Scope, e.Operation, e.Key, e.Generation, e.Phase, e.Token)
			return err
		},
		Committed: func(t testing.TB) []history.Effect {
			rows, err := pool.Query(ctx, `SELECT scope, operation, key, generation, phase, token FROM effects`)
			if err != nil {
				t.Fatal(err)
			}
			effects, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.Effect, error) {
				var e history.Effect
				err := row.Scan(&e.Scope, &e.Operation, &e.Key, &e.Generation, &e.Phase, &e.Token)
				return e, err
			})
			if err != nil {
				t.Fatal(err)
			}
			return effects
		},
		Kill: func(ctx context.Context, at *idem.Attempt[pgx.Tx]) error {
			kills.Add(1)
			_, err := at.Tx().Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		},
		Statement: func(ctx context.Context, at *idem.Attempt[pgx.Tx]) error {
			_, err := at.Tx().Exec(ctx, `SELECT 1 / $1::int`, 0)
			return err
		},
		Age:      age("expires_at"),
		AgeLease: age("locked_until"),
		Reap: func(t testing.TB) {
			if _, err := store.Reap(ctx, pgstore.ReapOptions{Logger: quiet}); err != nil {
				t.Errorf("reap: %v", err)
			}
		},
		Sweep: func(t testing.TB) {
			if _, err := store.Sweep(ctx, pgstore.SweepOptions{AbandonedFor: 500 * time.Millisecond, Fail: true, Logger: quiet}); err != nil {
				t.Errorf("sweep: %v", err)
			}
		},
		After: func(t testing.TB) []string {
			var bad []string
			var locks int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks)
			if err != nil {
				t.Fatal(err)
			}
			if locks > 0 {
				bad = append(bad, fmt.Sprintf("%d advisory locks held after every client is done", locks))
			}
			// Each killed connection is replaced; no other is lost.
			if opened := pool.Stat().NewConnsCount(); opened > int64(size)+kills.Load() {
				bad = append(bad, fmt.Sprintf("%d connections opened for a pool of %d and %d killed", opened, size, kills.Load()))
			}
			return bad
		},
	}
}
