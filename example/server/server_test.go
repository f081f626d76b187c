package server_test

// These tests drive the example API over HTTP, against a real PostgreSQL,
// one test per row of the protocol table in DESIGN.md.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
	"github.com/idemgen/idemgen/idem/idemtest"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pglocal"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

// service is the example's service with its createOrder calls counted and
// an optional hook that runs first inside the attempt.
type service struct {
	*orders.Service
	calls atomic.Int64
	hook  func(ctx context.Context) error
}

func (s *service) CreateOrder(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.CreateOrderRequestObject) (gen.CreateOrderResponseObject, error) {
	s.calls.Add(1)
	if s.hook != nil {
		if err := s.hook(ctx); err != nil {
			return nil, err
		}
	}
	return s.Service.CreateOrder(ctx, at, req)
}

type env struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *service
	url  string
	psp  *psp.Fake
	// pspDown makes the payment provider answer 503 while true.
	pspDown atomic.Bool
}

// newEnv serves the example on a database of its own. hook may be nil.
func newEnv(t *testing.T, hook func(context.Context) error) *env {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.NewMigratedDatabase(t, "example", migrateExample))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Connected now, as a pool that migrated would be.
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, pool, pool, hook)
}

// migrateExample migrates the example's database at url.
func migrateExample(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return orders.Migrate(ctx, pool)
}

// newEnvOn serves the example with its key store and business data on
// storePool, and checks state through checkPool.
func newEnvOn(t *testing.T, storePool, checkPool *pgxpool.Pool, hook func(context.Context) error) *env {
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
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(server.Handler(e.svc, storePool, log, testSecret))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) problem(t *testing.T) idem.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != idem.ContentTypeProblem {
		t.Fatalf("status %d with Content-Type %q, want %s; body %s", r.status, ct, idem.ContentTypeProblem, r.body)
	}
	var p idem.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Status != r.status || p.Detail == "" {
		t.Fatalf("problem %+v does not match status %d or has no detail", p, r.status)
	}
	return p
}

const order = `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_1"}`

// post sends createOrder. keys are the Idempotency-Key header values.
func (e *env) post(account, body string, keys ...string) reply {
	e.t.Helper()
	r, err := e.send(account, body, keys...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// send is post for goroutines other than the test's, which must not call
// t.Fatal.
func (e *env) send(account, body string, keys ...string) (reply, error) {
	req, err := http.NewRequest("POST", e.url+"/orders", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if account != "" {
		authorize(req, account)
	}
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	return e.roundTrip(req)
}

func (e *env) do(req *http.Request) reply {
	e.t.Helper()
	r, err := e.roundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) roundTrip(req *http.Request) (reply, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}, err
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) orders() int { return e.count(`SELECT count(*) FROM orders`) }
func (e *env) keys() int   { return e.count(`SELECT count(*) FROM idempotency_keys`) }

func (e *env) expect(orders, keys, calls int) {
	e.t.Helper()
	if got := e.orders(); got != orders {
		e.t.Errorf("%d orders, want %d", got, orders)
	}
	if got := e.keys(); got != keys {
		e.t.Errorf("%d stored keys, want %d", got, keys)
	}
	if got := e.svc.calls.Load(); got != int64(calls) {
		e.t.Errorf("createOrder ran %d times, want %d", got, calls)
	}
}

func TestMissingKeyIs400(t *testing.T) {
	e := newEnv(t, nil)
	r := e.post("acct_1", order)
	if r.status != 400 || r.problem(t).Type != idem.TypeMissingKey {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	if !strings.Contains(r.problem(t).Detail, "Idempotency-Key") {
		t.Errorf("detail does not say what to send: %s", r.body)
	}
	e.expect(0, 0, 0)
}

func TestMalformedKeyIs400(t *testing.T) {
	e := newEnv(t, nil)
	for name, keys := range map[string][]string{
		"empty":            {""},
		"over 255 chars":   {strings.Repeat("k", 256)},
		"not ASCII":        {"clé"},
		"sent twice":       {"a", "b"},
		"bad quoted value": {`"unterminated`},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.post("acct_1", order, keys...)
			if r.status != 400 || r.problem(t).Type != idem.TypeInvalidKey {
				t.Fatalf("got %d %s", r.status, r.body)
			}
		})
	}
	e.expect(0, 0, 0)
}

func TestQuotedKeyIsUnquoted(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.post("acct_1", order, `"k-1"`); r.status != 201 {
		t.Fatalf("quoted key: %d %s", r.status, r.body)
	}
	r := e.post("acct_1", order, "k-1")
	if r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("the unquoted key did not replay the quoted one: %d %v", r.status, r.header)
	}
	e.expect(1, 1, 1)
}

func TestUndecodableRequestIs400BeforeAnyClaim(t *testing.T) {
	e := newEnv(t, nil)
	for name, body := range map[string]string{
		"not JSON":     `{"amount_cents": `,
		"wrong type":   `{"amount_cents": "many", "currency": "EUR", "customer_id": "c"}`,
		"not integral": `{"amount_cents": 12.5, "currency": "EUR", "customer_id": "c"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := e.post("acct_1", body, "k-bad")
			if r.status != 400 || r.problem(t).Type != idem.TypeInvalidRequest {
				t.Fatalf("got %d %s", r.status, r.body)
			}
		})
	}
	t.Run("no account", func(t *testing.T) {
		if r := e.post("", order, "k-bad"); r.status != 400 || r.problem(t).Type != idem.TypeInvalidScope {
			t.Fatalf("got %d %s", r.status, r.body)
		}
	})
	e.expect(0, 0, 0)
	// The key was never claimed: a good request with it runs.
	if r := e.post("acct_1", order, "k-bad"); r.status != 201 {
		t.Fatalf("good request after bad ones: %d %s", r.status, r.body)
	}
}

func TestFirstRequestRunsOnceAndReplays(t *testing.T) {
	e := newEnv(t, nil)
	first := e.post("acct_1", order, "k1")
	if first.status != 201 || first.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	var o gen.Order
	if err := json.Unmarshal(first.body, &o); err != nil || o.AmountCents != 1250 || o.AccountId != "acct_1" {
		t.Fatalf("first body %s: %v", first.body, err)
	}
	if first.header.Get("Location") != "/orders/"+o.Id {
		t.Errorf("Location = %q", first.header.Get("Location"))
	}
	// Key order and whitespace do not change the request.
	for _, body := range []string{order, `{"customer_id":"cus_1","currency":"EUR","amount_cents":1250}`} {
		r := e.post("acct_1", body, "k1")
		if r.status != 201 || string(r.body) != string(first.body) {
			t.Fatalf("replay: %d %s, want the first body %s", r.status, r.body, first.body)
		}
		for _, h := range []string{"Content-Type", "Location"} {
			if r.header.Get(h) != first.header.Get(h) {
				t.Errorf("replayed %s = %q, want %q", h, r.header.Get(h), first.header.Get(h))
			}
		}
		if r.header.Get(idem.HeaderReplayed) != "true" {
			t.Errorf("replay lacks %s: true", idem.HeaderReplayed)
		}
	}
	e.expect(1, 1, 1)
	get, err := http.NewRequest("GET", e.url+"/orders/"+o.Id, nil)
	if err != nil {
		t.Fatal(err)
	}
	authorize(get, "acct_1")
	if r := e.do(get); r.status != 200 {
		t.Errorf("GET the order: %d %s", r.status, r.body)
	}
	authorize(get, "acct_2")
	if r := e.do(get); r.status != 404 {
		t.Errorf("GET the order from another account: %d, want 404", r.status)
	}
}

func TestKeyReusedForAnotherRequestIs422(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.post("acct_1", order, "k1"); r.status != 201 {
		t.Fatal(r.status)
	}
	r := e.post("acct_1", `{"amount_cents": 999, "currency": "EUR", "customer_id": "cus_1"}`, "k1")
	if r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	e.expect(1, 1, 1)
}

func TestDuplicateWhileFirstRunsIs409(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := newEnv(t, func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before the server's Close, which waits for the handler
	first := make(chan reply, 1)
	go func() {
		r, err := e.send("acct_1", order, "k1")
		if err != nil {
			r.body = []byte(err.Error())
		}
		first <- r
	}()
	<-entered // the first request holds the key now

	for _, body := range []string{order, `{"amount_cents": 1, "currency": "EUR", "customer_id": "x"}`} {
		r := e.post("acct_1", body, "k1")
		if r.status != 409 || r.problem(t).Type != idem.TypeKeyInUse {
			t.Fatalf("duplicate: %d %s", r.status, r.body)
		}
		if r.header.Get("Retry-After") == "" {
			t.Error("409 without Retry-After")
		}
	}
	unblock()
	if r := <-first; r.status != 201 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	if r := e.post("acct_1", order, "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("after the first finished: %d %s", r.status, r.body)
	}
	e.expect(1, 1, 1)
}

func TestTypedErrorResponseIsStoredAndReplayed(t *testing.T) {
	e := newEnv(t, nil)
	bad := `{"amount_cents": 0, "currency": "EUR", "customer_id": "cus_1"}`
	first := e.post("acct_1", bad, "k1")
	if first.status != 400 || first.problem(t).Type != orders.ProblemInvalidOrder {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := e.post("acct_1", bad, "k1")
	if again.status != 400 || string(again.body) != string(first.body) || again.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
	}
	e.expect(0, 1, 1)
}

func TestHandlerErrorReleasesKey(t *testing.T) {
	var failed atomic.Bool
	e := newEnv(t, func(context.Context) error {
		if failed.CompareAndSwap(false, true) {
			return errors.New("payment provider timed out")
		}
		return nil
	})
	r := e.post("acct_1", order, "k1")
	if r.status != 500 || r.problem(t).Type != idem.TypeInternal {
		t.Fatalf("failing handler: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "payment provider") {
		t.Errorf("500 leaks the error: %s", r.body)
	}
	e.expect(0, 0, 1)
	if r := e.post("acct_1", order, "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	e.expect(1, 1, 2)
}

func TestHandlerPanicReleasesKey(t *testing.T) {
	var panicked atomic.Bool
	e := newEnv(t, func(context.Context) error {
		if panicked.CompareAndSwap(false, true) {
			panic("nil map write")
		}
		return nil
	})
	if r := e.post("acct_1", order, "k1"); r.status != 500 || r.problem(t).Type != idem.TypeInternal {
		t.Fatalf("panicking handler: %d %s", r.status, r.body)
	}
	e.expect(0, 0, 1)
	if r := e.post("acct_1", order, "k1"); r.status != 201 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	e.expect(1, 1, 2)
}

func TestExpiredKeyRunsAgain(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.post("acct_1", order, "k1"); r.status != 201 {
		t.Fatal(r.status)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	// Past its TTL the key is new: even another body runs, without a 422.
	r := e.post("acct_1", `{"amount_cents": 5, "currency": "EUR", "customer_id": "cus_1"}`, "k1")
	if r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("after TTL: %d %v", r.status, r.header)
	}
	e.expect(2, 1, 2)
	if r := e.post("acct_1", `{"amount_cents": 5, "currency": "EUR", "customer_id": "cus_1"}`, "k1"); r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("the replaced key does not replay: %d %v", r.status, r.header)
	}
}

func TestSameKeyInTwoAccountsIsIndependent(t *testing.T) {
	e := newEnv(t, nil)
	a := e.post("acct_a", order, "shared-key")
	b := e.post("acct_b", `{"amount_cents": 7, "currency": "USD", "customer_id": "cus_9"}`, "shared-key")
	if a.status != 201 || b.status != 201 || b.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("a: %d, b: %d %v", a.status, b.status, b.header)
	}
	e.expect(2, 2, 2)
	if n := e.count(`SELECT count(DISTINCT account_id) FROM orders`); n != 2 {
		t.Errorf("orders in %d accounts, want 2", n)
	}
}

// Many clients send the same key at once: one order, and only 201s
// (the first and replays) and 409s.
func TestConcurrentSameKeyCreatesOneOrder(t *testing.T) {
	e := newEnv(t, nil)
	const n = 50
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		statuses = make([]int, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.send("acct_1", order, "storm")
			if err != nil {
				r.status = -1 // counted as neither 201 nor 409
			}
			statuses[i] = r.status
		}()
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[201]+counts[409] != n || counts[201] == 0 {
		t.Fatalf("statuses %v, want only 201 and 409, at least one 201", counts)
	}
	t.Logf("statuses: %v", counts)
	e.expect(1, 1, 1)
}

func TestUnreachableStoreIs503AndRunsNothing(t *testing.T) {
	check := pgtest.NewPool(t)
	if err := orders.Migrate(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	dead, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	e := newEnvOn(t, dead, check, nil)
	r := e.post("acct_1", order, "k1")
	if r.status != 503 || r.problem(t).Type != idem.TypeStoreUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %v %s", r.status, r.header, r.body)
	}
	e.expect(0, 0, 0)
}

// A database that stops between requests gives 503, and the handler does
// not run without its claim.
func TestStoppedDatabaseIs503AndRunsNothing(t *testing.T) {
	ctx := context.Background()
	cluster, err := pglocal.Start(ctx, pglocal.Options{ForceCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	pool, err := pgxpool.New(ctx, cluster.URL+"&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := orders.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, pool, pool, nil)
	if r := e.post("acct_1", order, "k1"); r.status != 201 {
		t.Fatalf("before the stop: %d %s", r.status, r.body)
	}
	if err := cluster.Close(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k1", "k2"} {
		r := e.post("acct_1", order, key)
		if r.status != 503 || r.problem(t).Type != idem.TypeStoreUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s after the stop: %d %v %s", key, r.status, r.header, r.body)
		}
	}
	if got := e.svc.calls.Load(); got != 1 {
		t.Fatalf("createOrder ran %d times, want 1 (only before the stop)", got)
	}
}

// A body over the configured limit is a 413 before any claim, and the
// handler does not run; within the limit the same request goes through.
func TestBodyOverLimitIs413(t *testing.T) {
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	svc := &service{Service: &orders.Service{Pool: pool}}
	srv := httptest.NewServer(gen.NewIdempotentHandler(svc, pgstore.New(pool, pgstore.Options{}), gen.IdempotentHandlerOptions{
		Options:      idem.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		MaxBodyBytes: 200,
	}))
	defer srv.Close()
	e := &env{t: t, pool: pool, svc: svc, url: srv.URL}
	padded := `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_` + strings.Repeat("x", 200) + `"}`
	r := e.post("acct_1", padded, "k1")
	if r.status != 413 || r.problem(t).Type != idem.TypeBodyTooLarge || !strings.Contains(r.problem(t).Detail, "200 bytes") {
		t.Fatalf("oversized body: %d %s", r.status, r.body)
	}
	e.expect(0, 0, 0)

	// A body of undeclared length is decoded as it arrives: a value that
	// runs past the limit, or a value within it followed by more than the
	// limit allows, is a 413 all the same, and nothing runs.
	for _, body := range []string{padded, order + strings.Repeat(" ", 200)} {
		// A reader of unknown length: the client sends it chunked.
		req, err := http.NewRequest("POST", e.url+"/orders", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		authorize(req, "acct_1")
		req.Header.Set("Idempotency-Key", "k1")
		r, err := e.roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 413 || r.problem(t).Type != idem.TypeBodyTooLarge {
			t.Fatalf("chunked %.40q...: %d %s", body, r.status, r.body)
		}
	}
	e.expect(0, 0, 0)

	if r := e.post("acct_1", order, "k1"); r.status != 201 {
		t.Fatalf("body within the limit: %d %s", r.status, r.body)
	}
}

// The baseline twin of createOrder, for benchmarks, runs without a key
// and stores nothing.
func TestBaselineOrderNeedsNoKey(t *testing.T) {
	e := newEnv(t, nil)
	for range 2 {
		req, _ := http.NewRequest("POST", e.url+"/baseline/orders", strings.NewReader(order))
		req.Header.Set("Content-Type", "application/json")
		authorize(req, "acct_1")
		if r := e.do(req); r.status != 201 || !strings.HasPrefix(r.header.Get("Location"), "/orders/ord_") {
			t.Fatalf("baseline: %d %v %s", r.status, r.header, r.body)
		}
	}
	e.expect(2, 0, 0)
}
