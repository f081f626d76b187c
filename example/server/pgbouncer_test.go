package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgbouncer"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The example's generated handler on a pool connected through a real
// PgBouncer with pool_mode = transaction, its store told so
// (TransactionPooling), its business data on the same pool: a first call,
// its replay, a 422, a 409 while the first runs, and a phased payment,
// charged once, that resumes after the provider failed. State is checked
// on a direct connection. It needs the pgbouncer binary: without it the
// test is skipped, except under CI.
func TestProtocolThroughPgBouncer(t *testing.T) {
	direct := pgtest.NewDatabase(t)
	checkPool, err := pgxpool.New(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(checkPool.Close)
	cfg, err := pgxpool.ParseConfig(pgbouncer.Start(t, pgbouncer.Transaction, direct))
	if err != nil {
		t.Fatal(err)
	}
	// pgx's default prepares each statement once per connection, but the
	// pooler sends a connection's next transaction to any server session,
	// where the statement was never prepared (PgBouncer 1.18 does not
	// carry prepared statements over). Exec mode prepares nothing named.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	storePool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storePool.Close)
	if err := orders.Migrate(t.Context(), storePool); err != nil {
		t.Fatal(err)
	}

	var holdNext atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var logs lockedLog
	e := newEnvBehindPooler(t, storePool, checkPool, &logs, func(ctx context.Context) error {
		if holdNext.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before the server's Close, which waits for the handler

	// A first call, its replay, and a 422 for another request on its key.
	first := e.post("acct_1", order, "k1")
	if first.status != 201 || first.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	if r := e.post("acct_1", order, "k1"); r.status != 201 || string(r.body) != string(first.body) || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %v %s, want the first body %s", r.status, r.header, r.body, first.body)
	}
	if r := e.post("acct_1", `{"amount_cents": 999, "currency": "EUR", "customer_id": "cus_1"}`, "k1"); r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("another request on the key: %d %s", r.status, r.body)
	}

	// 409 for duplicates while the first attempt runs, holding its key.
	holdNext.Store(true)
	held := make(chan reply, 1)
	go func() {
		r, err := e.send("acct_1", order, "k2")
		if err != nil {
			r.body = []byte(err.Error())
		}
		held <- r
	}()
	select {
	case <-entered:
	case r := <-held:
		t.Fatalf("the first call ended without its attempt being held: %d %s", r.status, r.body)
	}
	for _, body := range []string{order, `{"amount_cents": 1, "currency": "EUR", "customer_id": "x"}`} {
		r := e.post("acct_1", body, "k2")
		if r.status != 409 || r.problem(t).Type != idem.TypeKeyInUse || r.header.Get("Retry-After") == "" {
			t.Fatalf("duplicate while the first runs: %d %v %s", r.status, r.header, r.body)
		}
	}
	unblock()
	if r := <-held; r.status != 201 {
		t.Fatalf("the held first call: %d %s", r.status, r.body)
	}
	if r := e.post("acct_1", order, "k2"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("after the held call finished: %d %s", r.status, r.body)
	}

	// A phased payment: charged once, replayed, 422 for another amount.
	orderID := e.newOrder()
	paid := e.pay("p1", orderID, 1250)
	if paid.status != 201 || paid.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("payment: %d %s", paid.status, paid.body)
	}
	if r := e.pay("p1", orderID, 1250); r.status != 201 || string(r.body) != string(paid.body) || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("payment replay: %d %v %s", r.status, r.header, r.body)
	}
	if r := e.pay("p1", orderID, 999); r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("payment with another amount: %d %s", r.status, r.body)
	}
	e.expectPSP(psp.Stats{Requests: 1, Charges: 1})

	// The provider fails after the payment is recorded; the retry resumes
	// at that recovery point and charges once.
	second := e.post("acct_1", order, "order-2")
	if second.status != 201 {
		t.Fatalf("second order: %d %s", second.status, second.body)
	}
	secondID := orderIDOf(t, second)
	e.pspDown.Store(true)
	if r := e.pay("p2", secondID, 700); r.status != 500 {
		t.Fatalf("payment while the provider is down: %d %s", r.status, r.body)
	}
	e.pspDown.Store(false)
	if r := e.pay("p2", secondID, 700); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("payment retry: %d %s", r.status, r.body)
	}
	e.expectPSP(psp.Stats{Requests: 2, Charges: 2})
	if n := e.payments(psp.StatusSucceeded); n != 2 {
		t.Fatalf("%d succeeded payments, want 2", n)
	}

	e.expect(4, 6, 4) // orders k1, k2, order-TestProtocolThroughPgBouncer, order-2; those and p1, p2 as keys
	// No attempt left a lock behind on a server session.
	if n := e.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); n != 0 {
		t.Errorf("%d advisory locks held after every request ended, want 0", n)
	}
	if s := logs.String(); strings.Contains(s, "TransactionPooling") {
		t.Errorf("the store, told about the pooler, logged as if it had not been:\n%s", s)
	}
}

// newEnvBehindPooler is newEnvOn with the key store told that storePool
// goes through a pooler in transaction mode, logging to log.
func newEnvBehindPooler(t *testing.T, storePool, checkPool *pgxpool.Pool, log *lockedLog, hook func(context.Context) error) *env {
	e := &env{t: t, pool: checkPool, psp: psp.NewFake()}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.pspDown.Load() {
			http.Error(w, `{"error":"unavailable","message":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		e.psp.ServeHTTP(w, r)
	}))
	t.Cleanup(provider.Close)
	e.svc = &service{Service: &orders.Service{Pool: storePool, PSP: &psp.Client{BaseURL: provider.URL}}, hook: hook}
	logger := slog.New(slog.NewTextHandler(log, nil))
	store := pgstore.New(storePool, pgstore.Options{TransactionPooling: true, Logger: logger})
	srv := httptest.NewServer(gen.NewIdempotentHandler(e.svc, store, gen.IdempotentHandlerOptions{
		Options:           idem.Options{Logger: logger},
		StrictMiddlewares: []gen.StrictMiddlewareFunc{server.Authenticate(testSecret)},
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

func orderIDOf(t *testing.T, r reply) string {
	t.Helper()
	var o gen.Order
	if err := json.Unmarshal(r.body, &o); err != nil || o.Id == "" {
		t.Fatalf("order body %s: %v", r.body, err)
	}
	return o.Id
}

// lockedLog is a log the server's goroutines write and the test reads.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
