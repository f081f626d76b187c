package pgstore_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A server that loses its database mid-attempt, to a partition that closes
// nothing, holds the key no longer than the operation's lease: the
// attempt's transaction may sit idle no longer than that, so PostgreSQL
// ends it, and a retry through another connection runs the request, once.
// The lost attempt's own goroutine returns too, within the same bound.
func TestBlackholedConnectionReleasesKey(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	direct := newPool(t, nil)
	if _, err := direct.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	p, partitioned := proxied(t, direct)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const lease = 2 * time.Second
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: lease}
	var runs atomic.Int64
	serve := func(e *idem.Engine[pgx.Tx], inserted chan struct{}) (*idem.Response, error) {
		r, _ := http.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		return e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			runs.Add(1)
			if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ('k1')`); err != nil {
				return nil, err
			}
			if inserted != nil {
				inserted <- struct{}{}
				<-inserted // the partition is in place
			}
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		})
	}

	// The first attempt inserts, then the network between it and
	// PostgreSQL goes silent before it can commit.
	inserted := make(chan struct{})
	first := make(chan *idem.Response, 1)
	go func() {
		resp, _ := serve(idem.NewEngine(pgstore.New(partitioned, pgstore.Options{}), idem.Options{Logger: quiet}), inserted)
		first <- resp
	}()
	<-inserted
	p.Hole(true)
	inserted <- struct{}{}

	// A retry on a healthy connection gets 409 while the lost attempt's
	// transaction lives, then runs.
	retry := idem.NewEngine(pgstore.New(direct, pgstore.Options{}), idem.Options{Logger: quiet})
	start := time.Now()
	deadline := start.Add(time.Minute) // far past the bound; without it, the key would be held for good
	var resp *idem.Response
	var err error
	for {
		resp, err = serve(retry, nil)
		if err != nil || resp.Status != 409 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a client's Retry-After, shortened
	}
	if err != nil || resp.Status != 201 {
		t.Fatalf("retry after %v: %+v, %v; want 201 once the lost attempt's lease bound passed", time.Since(start), resp, err)
	}
	t.Logf("the retry ran %v after the partition (lease %v)", time.Since(start).Round(10*time.Millisecond), lease)

	select {
	case resp := <-first:
		if resp == nil || resp.Status != 503 {
			t.Errorf("the partitioned attempt answered %+v, want 503", resp)
		}
	case <-time.After(time.Minute):
		t.Fatal("the partitioned attempt never returned: ending it has no deadline")
	}
	var orders int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || runs.Load() != 2 {
		t.Fatalf("%d orders after %d runs; want the lost attempt's insert rolled back and the retry's committed", orders, runs.Load())
	}
}

// proxied is pgtest.Proxied.
func proxied(t *testing.T, direct *pgxpool.Pool, configure ...func(*pgxpool.Config)) (*pgtest.Proxy, *pgxpool.Pool) {
	t.Helper()
	return pgtest.Proxied(t, direct, configure...)
}

// When the acknowledgement of an attempt's COMMIT is lost, the attempt may
// have committed: the 503 says so, and the retry returns the stored
// result instead of running again.
func TestLostCommitAcknowledgement(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	direct := newPool(t, nil)
	if _, err := direct.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// The attempt's COMMIT is sent with its last statement; in pgx's exec
	// mode its text is on the wire every time, for the proxy to find.
	p, partitioned := proxied(t, direct, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Second}
	var runs atomic.Int64
	serve := func(e *idem.Engine[pgx.Tx]) (*idem.Response, error) {
		r, _ := http.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		return e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			runs.Add(1)
			if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ('k1')`); err != nil {
				return nil, err
			}
			return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, nil
		})
	}
	p.HoleAfter("commit\x00") // the end of the COMMIT statement's text
	resp, err := serve(idem.NewEngine(pgstore.New(partitioned, pgstore.Options{}), idem.Options{Logger: quiet}))
	if err != nil || resp.Status != 503 || !bytes.Contains(resp.Body, []byte("may have run")) {
		t.Fatalf("lost commit acknowledgement: %+v, %v; want a 503 saying the request may have run", resp, err)
	}
	retry, err := serve(idem.NewEngine(pgstore.New(direct, pgstore.Options{}), idem.Options{Logger: quiet}))
	if err != nil || retry.Status != 201 || !retry.Replayed {
		t.Fatalf("retry: %+v, %v; want the committed 201, replayed", retry, err)
	}
	var orders int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || runs.Load() != 1 {
		t.Fatalf("%d orders after %d runs, want 1 and 1", orders, runs.Load())
	}
}

// A database that stops answering without closing anything (a partition,
// a frozen host) gets a 503 store-unavailable within the bound the
// engine's StoreTimeout sets, wherever the request was when it stalled:
// waiting on its lookup, on a handler's statement, or on a phase's start.
// Nothing runs unclaimed, the stalled attempt's writes are rolled back,
// its connection is discarded, and a retry once the partition heals runs
// the request once.
func TestStoreStallIs503(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	const lease = 2 * time.Second
	for _, tc := range []struct {
		name   string
		phased bool
		// stallAt is where the partition begins: "lookup" before the
		// request, "connect" before it with no connection open,
		// "handler" at the handler's first statement.
		stallAt string
		// logged is what the request's one log line says.
		logged string
	}{
		{"lookup", false, "lookup", "did not answer within 2s"},
		{"connect", false, "connect", "could be opened"},
		{"handler", false, "handler", "did not answer within 2s"},
		{"phased lookup", true, "lookup", "did not answer within 2s"},
		{"phase", true, "handler", "did not answer within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			direct := newPool(t, nil)
			if _, err := direct.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			p, partitioned := proxied(t, direct)
			var logs lockedBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			// Bounds no statement of a loaded machine's reaches.
			opts := idem.Options{Logger: logger, StoreTimeout: 2 * time.Second}
			storeOpts := pgstore.Options{}
			if tc.stallAt == "connect" {
				// The pool's own bound comes first: the pool had room, so
				// its wait was on a database that did not answer, not on
				// a busy pool.
				opts.StoreTimeout, storeOpts.AcquireTimeout = time.Minute, 2*time.Second
			}
			op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: lease}
			if tc.phased {
				op.RecoveryPoints = []string{"charged"}
			}
			var runs atomic.Int64
			stall := func() {}
			handler := func(ctx context.Context, tx pgx.Tx) error {
				runs.Add(1)
				stall()
				_, err := tx.Exec(ctx, `INSERT INTO orders (key) VALUES ('k1')`)
				return err
			}
			serve := func(e *idem.Engine[pgx.Tx], key string) (*idem.Response, error) {
				r, _ := http.NewRequest("POST", "/orders", nil)
				r.Header.Set(idem.HeaderKey, key)
				rctx := idem.WithRequest(ctx, r)
				created := func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }
				if tc.phased {
					return e.ServePhased(rctx, op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
						if at.RecoveryPoint() == "" {
							return "charged", nil, nil
						}
						return "", created, handler(ctx, at.Tx())
					})
				}
				return e.Serve(rctx, op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
					return created, handler(ctx, at.Tx())
				})
			}
			stalled := idem.NewEngine(pgstore.New(partitioned, storeOpts), opts)
			// The engine reads its secret, and the pool connects, before
			// the partition.
			if resp, err := serve(stalled, "warm-up"); err != nil || resp.Status != 201 {
				t.Fatalf("warm-up: %+v, %v", resp, err)
			}
			runs.Store(0)
			logs.Reset()
			switch tc.stallAt {
			case "lookup":
				p.Hole(true)
			case "connect":
				partitioned.Reset()
				p.Hole(true)
			case "handler":
				stall = func() { p.Hole(true) }
			}

			answered := make(chan *idem.Response, 1)
			go func() {
				resp, err := serve(stalled, "k1")
				if err != nil {
					t.Errorf("stalled request: %v", err)
				}
				answered <- resp
			}()
			var resp *idem.Response
			select {
			case resp = <-answered:
			case <-time.After(time.Minute): // bounds a hang, far past lease and StoreTimeout
				t.Fatal("the stalled request got no answer: waits on the store have no bound")
			}
			stall = func() {}
			if resp == nil || resp.Status != 503 || !bytes.Contains(resp.Body, []byte(idem.TypeStoreUnavailable)) || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("stalled request: %+v; want 503 store-unavailable with Retry-After", resp)
			}
			if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("the stalled request logged %d lines, want one saying %q:\n%s", n, tc.logged, logs.String())
			}
			wantRuns := int64(0)
			if tc.stallAt == "handler" {
				wantRuns = 1
			}
			if runs.Load() != wantRuns {
				t.Fatalf("the handler ran %d times while the store stalled, want %d", runs.Load(), wantRuns)
			}

			// A retry through a healthy connection runs the request once,
			// when the stalled session's lease lets go of the key.
			runs.Store(0)
			healthy := idem.NewEngine(pgstore.New(direct, pgstore.Options{}), idem.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			deadline := time.Now().Add(time.Minute)
			for {
				resp, err := serve(healthy, "k1")
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status == 201 {
					break
				}
				if resp.Status != 409 || time.Now().After(deadline) {
					t.Fatalf("retry: %+v; want 409 until the stalled attempt's lease passes, then 201", resp)
				}
				time.Sleep(50 * time.Millisecond) // a client's Retry-After, shortened
			}
			var orders int
			if err := direct.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil {
				t.Fatal(err)
			}
			if orders != 2 || runs.Load() != 1 {
				t.Fatalf("%d orders (with the warm-up's) after the retry ran %d times; want 2 and 1", orders, runs.Load())
			}
			// Once the partition heals, the stalled engine serves again:
			// the stalled connection went out of its pool, not back in.
			p.Hole(false)
			if resp, err := serve(stalled, "after"); err != nil || resp.Status != 201 {
				t.Fatalf("after the partition: %+v, %v; want 201", resp, err)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer that goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// A statement the network holds back until PostgreSQL has ended the
// transaction as idle for the lease is an outage, not a lease overrun:
// the handler sent it long before its lease was up, so a retry works
// once the network does.
func TestHeldStatementIsNotOverrun(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	direct := newPool(t, nil)
	p, partitioned := proxied(t, direct)
	e := idem.NewEngine(pgstore.New(partitioned, pgstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler), StoreTimeout: time.Minute})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Second}
	r, _ := http.NewRequest("POST", "/orders", nil)
	r.Header.Set(idem.HeaderKey, "k1")
	resp, err := e.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		if _, err := at.Tx().Exec(ctx, `SELECT 1`); err != nil {
			return nil, err
		}
		p.Hole(true)
		go func() {
			// The partition heals once PostgreSQL has ended the attempt's
			// session, which nothing announces.
			for {
				var idle int
				err := direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&idle)
				if err != nil || idle == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			p.Hole(false)
		}()
		_, err := at.Tx().Exec(ctx, `SELECT 1`)
		return func(w http.ResponseWriter) error { w.WriteHeader(201); return nil }, err
	})
	if err != nil || resp.Status != 503 || !bytes.Contains(resp.Body, []byte(idem.TypeStoreUnavailable)) {
		t.Fatalf("%+v, %v; want 503 store-unavailable, not a lease overrun", resp, err)
	}
}
