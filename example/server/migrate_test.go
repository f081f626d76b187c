package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/upgrade"
)

// TestMigrationsUnderTraffic applies the key store's newest migration
// the way the example does at start (orders.Migrate: the key store's
// migrations, then the application's tables) while requests run and a
// long transaction holds the key table, as a report or a slow phase
// would. The migration waits for its lock at most its lock timeout, gives
// up and tries again, so requests go on being answered while the table
// stays busy; once the transaction ends, the migration applies. No
// request fails. Were the migration to queue behind the transaction
// without a bound, every request would queue behind the migration, and
// this test would end at its deadline.
func TestMigrationsUnderTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	m, err := pgstore.NewMigrator(pool, pgstore.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The database as the previous release left it: the migrations after
	// it include one that takes the key table's lock (0009).
	if _, err := m.Down(ctx, upgrade.PreviousMigration); err != nil {
		t.Fatal(err)
	}
	// The migration, the blocker and the test's probes each have a
	// connection of their own, as they would in other processes: the
	// server's pool is busy with the traffic.
	admin, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// Each attempt holds its order row a while, as real work does.
	svc := &orders.Service{Pool: pool, WorkDelay: 5 * time.Millisecond}
	srv := httptest.NewServer(server.Handler(svc, pool, slog.New(slog.DiscardHandler), testSecret))
	defer srv.Close()

	var (
		answered atomic.Int64
		mu       sync.Mutex
		failures []string
		slowest  time.Duration
	)
	send := func(key string) {
		body := `{"amount_cents": 1200, "currency": "EUR", "customer_id": "cus_1"}`
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/orders", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		authorize(req, "acct_1")
		req.Header.Set("Idempotency-Key", key)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		took := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				failures = append(failures, fmt.Sprintf("%s: %v", key, err))
			}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			failures = append(failures, fmt.Sprintf("%s: %d %s", key, resp.StatusCode, b))
			return
		}
		slowest = max(slowest, took)
		answered.Add(1)
	}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for c := range 4 {
		clients.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("c%d-%d", c, i)
				send(key) // the first execution
				send(key) // its replay
			}
		})
	}
	waitAnswered := func(n int64, what string) {
		t.Helper()
		for answered.Load() < n {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %d requests answered, want %d; requests stopped behind the migration", what, answered.Load(), n)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitAnswered(20, "before the migration")

	blocker, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(context.Background())
	if _, err := blocker.Exec(ctx, `SELECT count(*) FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	retries := make(chan struct{}, 1000)
	const lockTimeout = 300 * time.Millisecond
	migrated := make(chan error, 1)
	go func() {
		migrated <- orders.MigrateWith(ctx, admin, pgstore.MigrateOptions{LockTimeout: lockTimeout, Logger: retrySignal(retries)})
	}()
	pgtest.WaitForLockWait(ctx, t, admin, "ALTER TABLE idempotency_keys")
	began := time.Now()
	// Requests go on while the table is held and the migration retries.
	waitAnswered(answered.Load()+40, "while the migration waits")
	select {
	case <-retries:
	case <-ctx.Done():
		t.Fatal("the migration never gave up waiting for its lock")
	}
	held := time.Since(began)
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("the migration, once the table was free: %v", err)
	}
	waitAnswered(answered.Load()+20, "after the migration")
	close(stop)
	clients.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Errorf("a request failed during the migration: %s", f)
	}
	if st, err := m.Status(ctx); err != nil || st[len(st)-1].Applied.IsZero() {
		t.Errorf("the newest migration is not recorded as applied (%v)", err)
	}
	t.Logf("%d requests answered; the table was held %s while the migration retried (lock timeout %s); the slowest request took %s",
		answered.Load(), held.Round(time.Millisecond), lockTimeout, slowest.Round(time.Millisecond))
}

// retrySignal is a logger that sends on c for each retry of a migration
// that found its table busy.
func retrySignal(c chan<- struct{}) *slog.Logger {
	return slog.New(retryHandler{c})
}

type retryHandler struct{ c chan<- struct{} }

func (h retryHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h retryHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "waits for a busy table") {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h retryHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retryHandler) WithGroup(string) slog.Handler      { return h }
