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

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// More slow attempts are in flight than the pool has connections. A
// duplicate of one of them still gets its 409, and a completed key its
// replay, while every slow attempt is still blocked: the protocol's reads
// never queue behind running attempts. Were they queued, they could only
// answer once the attempts were let go, after the client's timeout.
func TestDuplicateDuringPoolExhaustion(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := orders.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}

	var block atomic.Bool
	entered := make(chan string, 16) // the keys of the attempts that run
	release := make(chan struct{})
	svc := &service{Service: &orders.Service{Pool: pool}, hook: func(ctx context.Context) error {
		if block.Load() {
			entered <- idem.RequestFrom(ctx).Header.Get(idem.HeaderKey)
			<-release
		}
		return nil
	}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A long acquire timeout: attempts over the budget wait for a turn,
	// and reads that queued would wait as long.
	store := pgstore.New(pool, pgstore.Options{AcquireTimeout: time.Minute})
	srv := httptest.NewServer(gen.NewIdempotentHandler(svc, store, gen.IdempotentHandlerOptions{
		Options: idem.Options{Logger: quiet},
	}))
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, svc: svc, url: srv.URL}
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(key string) (reply, error) {
		req, err := http.NewRequest("POST", e.url+"/orders", strings.NewReader(order))
		if err != nil {
			return reply{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		authorize(req, "acct_1")
		req.Header.Set(idem.HeaderKey, key)
		resp, err := client.Do(req)
		if err != nil {
			return reply{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, body}, err
	}

	done, err := send("done")
	if err != nil || done.status != 201 {
		t.Fatalf("completed key: %+v, %v", done, err)
	}
	block.Store(true)
	const slow = 6 // more than the pool's 4 connections
	var wg sync.WaitGroup
	slowReplies := make([]reply, slow)
	slowErrs := make([]error, slow)
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slowReplies[i], slowErrs[i] = send(fmt.Sprintf("slow-%d", i))
		}()
	}
	defer func() { // let the attempts go even if the test fails
		select {
		case <-release:
		default:
			close(release)
		}
		wg.Wait()
	}()
	// The attempts' budget is the pool's 4 connections less one kept for
	// reads; the others wait for a turn.
	var running []string
	for range 3 {
		running = append(running, <-entered)
	}

	for _, key := range running {
		began := time.Now()
		r, err := send(key)
		if err != nil {
			t.Fatalf("duplicate of %s while the pool is full: %v", key, err)
		}
		if r.status != 409 {
			t.Fatalf("duplicate of %s: %d %s, want 409", key, r.status, r.body)
		}
		t.Logf("409 for %s in %v", key, time.Since(began).Round(time.Millisecond))
	}
	began := time.Now()
	r, err := send("done")
	if err != nil || r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("replay while the pool is full: %+v, %v", r, err)
	}
	t.Logf("replay in %v", time.Since(began).Round(time.Millisecond))

	close(release)
	wg.Wait()
	for i := range slow {
		if slowErrs[i] != nil || slowReplies[i].status != 201 {
			t.Errorf("slow-%d: %d %s, %v; want 201 once let go", i, slowReplies[i].status, slowReplies[i].body, slowErrs[i])
		}
	}
	e.expect(1+slow, 1+slow, 1+slow)
}

// With the attempts' budget used up, an attempt that finds no turn within
// the acquire timeout is answered 503 with Retry-After, not queued for
// as long as the client waits.
func TestAttemptOverBudgetIs503(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	svc := &service{Service: &orders.Service{Pool: pool}, hook: func(ctx context.Context) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := pgstore.New(pool, pgstore.Options{AttemptConns: 1, AcquireTimeout: 100 * time.Millisecond})
	srv := httptest.NewServer(gen.NewIdempotentHandler(svc, store, gen.IdempotentHandlerOptions{
		Options: idem.Options{Logger: quiet},
	}))
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, svc: svc, url: srv.URL}
	first := make(chan reply, 1)
	go func() {
		r, _ := e.send("acct_1", order, "first")
		first <- r
	}()
	<-entered
	r := e.post("acct_1", order, "second")
	close(release)
	// The store is reachable, only busy, and the answer says so.
	if r.status != 503 || r.problem(t).Type != idem.TypeStoreBusy || r.header.Get("Retry-After") == "" {
		t.Fatalf("attempt over budget: %d %v %s, want a 503 store-busy with Retry-After", r.status, r.header, r.body)
	}
	if got := <-first; got.status != 201 {
		t.Fatalf("first attempt: %d %s", got.status, got.body)
	}
	if r := e.post("acct_1", order, "second"); r.status != 201 {
		t.Fatalf("retry of the refused attempt: %d %s", r.status, r.body)
	}
	e.expect(2, 2, 2)
}
