package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/upgrade"
)

// PostgresOptions configure Postgres; the zero value is the store alone.
type PostgresOptions struct {
	// Store are the store's options: a replay filter, say.
	Store pgstore.Options
	// Expire, when set, is called for each key the checker ages past its
	// TTL, as time would: to drop the key's replay filter entry, whose
	// TTL is shorter than the key's.
	Expire func(testing.TB, idem.ID)
	// Proxy, when set, is the proxy the pool connects through: the
	// harness's Stall black-holes it for a while.
	Proxy *pgtest.Proxy
	// StoreTimeout is the engine's bound on waiting for the store.
	StoreTimeout time.Duration
	// Cache, when set, is the Redis of the store's replay filter (its
	// ReplayCache), whose keys start with CachePrefix: the harness's
	// SnapshotCache and LoseCache use it.
	Cache       *redis.Client
	CachePrefix string
	// Admin, when set, is a pool on the same database that the checker's
	// own statements and the janitor use, as an operator's tools and a
	// janitor on another host would: a stall of the servers' proxy does
	// not reach it. Nil uses the servers' pool.
	Admin *pgxpool.Pool
}

// advisoryLocks counts the advisory locks held on the database.
const advisoryLocks = `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// Postgres is the checker's harness for the Postgres store on pool, whose
// database has the key store migrated: the handlers' effects go to a table
// of their own, written in the attempts' transactions; keys age in the
// key table; the reaper and the sweeper (which fails abandoned attempts)
// are the store's own; and once the clients are done, no advisory lock
// may be held and no connection lost but those the checker killed.
func Postgres(t testing.TB, pool *pgxpool.Pool, opts PostgresOptions) Harness[pgx.Tx] {
	ctx := context.Background()
	admin := opts.Admin
	if admin == nil {
		admin = pool
	}
	if _, err := admin.Exec(ctx, `CREATE TABLE history_effects (scope text, operation text, key text, generation bigint, phase text, token text)`); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	store := pgstore.New(pool, opts.Store)
	janitor := pgstore.New(admin, pgstore.Options{})
	// An operator's keys forget, with -redis-url where the servers have a
	// replay filter.
	operator := pgstore.New(admin, pgstore.Options{ReplayCache: opts.Store.ReplayCache, Logger: quiet})
	var forgets, losses atomic.Int64
	var kills, stalls atomic.Int64
	var stalling atomic.Int32 // the stalls under way: the last one to end heals the proxy
	// age changes a key's row unless a phase holds it, as the clock would
	// between phases; the checker never waits for a running phase.
	age := func(column string) func(testing.TB, idem.ID) {
		sql := `UPDATE idempotency_keys SET ` + column + ` = now() - interval '1 second'
			WHERE (scope, operation, key) IN (SELECT scope, operation, key FROM idempotency_keys
				WHERE scope = $1 AND operation = $2 AND key = $3 FOR UPDATE SKIP LOCKED)`
		return func(t testing.TB, id idem.ID) {
			if _, err := admin.Exec(ctx, sql, id.Scope, id.Operation, id.Key); err != nil {
				t.Errorf("age %s of %v: %v", column, id, err)
			}
		}
	}
	// Migrations run from a process of their own: a pool of their own.
	migratorPool, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	// A few tries each: giving up on a busy table is the migrator's
	// answer to traffic, and the next disturbance migrates again.
	migrator, err := pgstore.NewMigrator(migratorPool, pgstore.MigrateOptions{LockTimeout: 100 * time.Millisecond, Attempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	var migrations atomic.Int64
	t.Cleanup(func() {
		migratorPool.Close()
		t.Logf("the migrations since %s were rolled back and applied again %d times while clients ran", upgrade.PreviousRelease, migrations.Load())
		if opts.Proxy != nil {
			t.Logf("the store stopped answering %d times while clients ran", stalls.Load())
		}
	})
	var stall func(testing.TB, *rand.Rand)
	if opts.Proxy != nil {
		stall = func(t testing.TB, rng *rand.Rand) {
			stalls.Add(1)
			stalling.Add(1)
			opts.Proxy.Hole(true)
			// The partition's length: the disturbance itself, not a wait
			// for anything.
			time.Sleep(time.Duration(100+rng.IntN(1400)) * time.Millisecond)
			if stalling.Add(-1) == 0 {
				opts.Proxy.Hole(false)
			}
		}
	}
	forget := func(t testing.TB, id idem.ID) bool {
		_, err := operator.ForgetKey(ctx, id, pgstore.ForgetOptions{})
		switch {
		case err == nil:
			forgets.Add(1)
			return true
		case !errors.Is(err, pgstore.ErrKeyHeld) && !errors.Is(err, pgstore.ErrKeyNotFound):
			t.Errorf("forget %v: %v", id, err)
		}
		return false
	}
	var snapshotCache func(testing.TB)
	var loseCache func(testing.TB, *rand.Rand)
	if opts.Cache != nil {
		snapshotCache, loseCache = cacheLoss(ctx, opts.Cache, opts.CachePrefix, &losses)
	}
	t.Cleanup(func() {
		t.Logf("%d keys forgotten and %d losses of the replay filter's writes while clients ran", forgets.Load(), losses.Load())
	})
	return Harness[pgx.Tx]{
		Forget:        forget,
		SnapshotCache: snapshotCache,
		LoseCache:     loseCache,
		Stall:         stall,
		StoreTimeout:  opts.StoreTimeout,
		Store:         store,
		Transactional: true,
		Effect: func(ctx context.Context, at *idem.Attempt[pgx.Tx], e Effect) error {
			_, err := at.Tx().Exec(ctx, `INSERT INTO history_effects VALUES ($1, $2, $3, $4, $5, $6)`, e.Scope, e.Operation, e.Key, e.Generation, e.Phase, e.Token)
			return err
		},
		Committed: func(t testing.TB) []Effect {
			rows, err := admin.Query(ctx, `SELECT scope, operation, key, generation, phase, token FROM history_effects`)
			if err != nil {
				t.Fatal(err)
			}
			effects, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Effect, error) {
				var e Effect
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
		Age: func(t testing.TB, id idem.ID) {
			age("expires_at")(t, id)
			if opts.Expire != nil {
				opts.Expire(t, id)
			}
		},
		AgeLease: age("locked_until"),
		Reap: func(t testing.TB) {
			if _, err := janitor.Reap(ctx, pgstore.ReapOptions{Logger: quiet}); err != nil {
				t.Errorf("reap: %v", err)
			}
		},
		Sweep: func(t testing.TB) {
			if _, err := janitor.Sweep(ctx, pgstore.SweepOptions{AbandonedFor: 500 * time.Millisecond, Fail: true, Logger: quiet}); err != nil {
				t.Errorf("sweep: %v", err)
			}
		},
		// A rolling upgrade's migrations and a rollback's, while clients
		// run: those since the previous release rolled back and applied
		// again, each waiting its lock timeout behind busy attempts and
		// retrying.
		Migrate: func(t testing.TB) {
			migrations.Add(1)
			// Giving up on a table busy for every try is the migrator's
			// answer to traffic, not a failure: the code serves either
			// schema, and the next disturbance migrates again.
			if _, err := migrator.Down(ctx, upgrade.PreviousMigration); err != nil && !errors.Is(err, pgstore.ErrMigrationLocked) {
				t.Errorf("migrate down: %v", err)
			}
			if _, err := migrator.Up(ctx, 0); err != nil && !errors.Is(err, pgstore.ErrMigrationLocked) {
				t.Errorf("migrate up: %v", err)
			}
		},
		Settle: func(t testing.TB) {
			// A session a stall cut off holds its key's lock until the
			// lease it set passes and PostgreSQL ends it; a lock held for
			// longer than this bound is left behind for good.
			deadline := time.Now().Add(time.Minute)
			for {
				var locks int
				if err := admin.QueryRow(ctx, advisoryLocks).Scan(&locks); err != nil {
					t.Fatal(err)
				}
				if locks == 0 || stalls.Load() == 0 || time.Now().After(deadline) {
					return
				}
				time.Sleep(50 * time.Millisecond) // polls PostgreSQL's own timeouts, which nothing signals
			}
		},
		After: func(t testing.TB) []string {
			var bad []string
			var locks int
			err := admin.QueryRow(ctx, advisoryLocks).Scan(&locks)
			if err != nil {
				t.Fatal(err)
			}
			if locks > 0 {
				bad = append(bad, fmt.Sprintf("%d advisory locks held after every client is done", locks))
			}
			// Each killed connection is replaced; no other is lost but
			// those a stall cut off, any of the pool's.
			size := int64(pool.Config().MaxConns)
			if opened := pool.Stat().NewConnsCount(); stalls.Load() == 0 && opened > size+kills.Load() {
				bad = append(bad, fmt.Sprintf("%d connections opened for a pool of %d and %d killed", opened, size, kills.Load()))
			}
			return bad
		},
	}
}

// cacheLoss returns what takes a snapshot of the keys under prefix in
// rdb, and what loses writes: all of them, or those since the snapshot,
// which is restored over them.
func cacheLoss(ctx context.Context, rdb *redis.Client, prefix string, losses *atomic.Int64) (func(testing.TB), func(testing.TB, *rand.Rand)) {
	type dumped struct {
		value string
		ttl   time.Duration
	}
	var mu sync.Mutex
	var snapshot map[string]dumped
	snap := func(t testing.TB) {
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Errorf("snapshot the cache: %v", err)
			return
		}
		taken := map[string]dumped{}
		for _, k := range keys {
			v, err := rdb.Dump(ctx, k).Result()
			if err != nil {
				continue // gone since KEYS
			}
			ttl, err := rdb.PTTL(ctx, k).Result()
			if err != nil || ttl <= 0 {
				continue
			}
			taken[k] = dumped{v, ttl}
		}
		mu.Lock()
		snapshot = taken
		mu.Unlock()
	}
	lose := func(t testing.TB, rng *rand.Rand) {
		losses.Add(1)
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("lose the cache's writes: %v", err)
			return
		}
		mu.Lock()
		restore := snapshot
		mu.Unlock()
		if rng.IntN(3) == 0 {
			return // all of them
		}
		for k, d := range restore {
			if err := rdb.RestoreReplace(ctx, k, d.ttl, d.value).Err(); err != nil {
				t.Errorf("restore %s: %v", k, err)
			}
		}
	}
	return snap, lose
}
