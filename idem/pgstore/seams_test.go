package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// errLog collects the records of a logger, to assert on their levels.
type errLog struct {
	mu   sync.Mutex
	recs []string
}

func (l *errLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Level.String()+" "+r.Message)
	return nil
}
func (l *errLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errLog) WithGroup(string) slog.Handler      { return l }

func (l *errLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []string
	for _, r := range l.recs {
		if strings.HasPrefix(r, "ERROR") {
			errs = append(errs, r)
		}
	}
	return errs
}

// keyed is a POST with key, in a context the engine can serve.
func keyed(key string) context.Context {
	r := httptest.NewRequest("POST", "/", nil)
	if key != "" {
		r.Header.Set(idem.HeaderKey, key)
	}
	return idem.WithRequest(context.Background(), r)
}

func created(body string) idem.Writer {
	return func(w http.ResponseWriter) error {
		w.WriteHeader(http.StatusCreated)
		_, err := w.Write([]byte(body))
		return err
	}
}

// Every pool size works through the whole protocol: a first execution
// that writes through its attempt and derives a key, a replay, a 422, a
// phased execution, a request without a key and, where a second
// connection exists, a 409 while the first attempt runs. The derived-key
// secret must not need a connection while a claim holds the only one.
func TestOneConnectionPool(t *testing.T) {
	for _, size := range []int32{1, 2, 4} {
		t.Run(fmt.Sprintf("MaxConns=%d", size), func(t *testing.T) {
			ctx := context.Background()
			pool := newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = size })
			if _, err := pool.Exec(ctx, `CREATE TABLE orders (key text PRIMARY KEY, charge text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			log := &errLog{}
			e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
			op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
			insert := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				_, err := at.Tx().Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, at.Key(), at.DerivedKey("charge"))
				if err != nil {
					return nil, err
				}
				return created(`{"key":"` + at.Key() + `"}`), nil
			}
			for i, want := range []struct {
				key      string
				fp       string
				status   int
				replayed bool
			}{
				{"k1", "a", 201, false},
				{"k1", "a", 201, true},
				{"k1", "b", 422, false},
				{"k2", "a", 201, false},
			} {
				resp, err := e.Serve(keyed(want.key), op, []byte(want.fp), insert)
				if err != nil || resp.Status != want.status || resp.Replayed != want.replayed {
					t.Fatalf("request %d (%s): %+v, %v; want %d (replayed: %v)", i, want.key, resp, err, want.status, want.replayed)
				}
			}
			keyless := &idem.Operation{Name: "note", TTL: time.Hour, Lease: time.Minute, KeyOptional: true}
			if resp, err := e.Serve(keyed(""), keyless, nil, func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				_, err := at.Tx().Exec(ctx, `SELECT 1`)
				return created("{}"), err
			}); err != nil || resp.Status != 201 {
				t.Fatalf("request without a key: %+v, %v", resp, err)
			}
			pay := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"charged"}}
			phases := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
				if at.RecoveryPoint() == "" {
					_, err := at.Tx().Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, "pay-"+at.Key(), at.DerivedKey("charge"))
					return "charged", nil, err
				}
				return "", created(`{"paid":true}`), nil
			}
			for _, replayed := range []bool{false, true} {
				resp, err := e.ServePhased(keyed("p1"), pay, []byte("a"), phases)
				if err != nil || resp.Status != 201 || resp.Replayed != replayed {
					t.Fatalf("phased (replayed: %v): %+v, %v", replayed, resp, err)
				}
			}
			if size > 1 {
				// A duplicate while the first attempt runs gets its 409 on
				// the connection the attempt leaves free.
				running, finish := make(chan struct{}), make(chan struct{})
				done := make(chan *idem.Response)
				go func() {
					resp, _ := e.Serve(keyed("k3"), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
						if _, err := at.Tx().Exec(ctx, `SELECT 1`); err != nil {
							return nil, err
						}
						close(running)
						<-finish
						return created("{}"), nil
					})
					done <- resp
				}()
				<-running
				if resp, err := e.Serve(keyed("k3"), op, []byte("a"), insert); err != nil || resp.Status != 409 {
					t.Errorf("duplicate while the first runs: %+v, %v; want 409", resp, err)
				}
				close(finish)
				if resp := <-done; resp == nil || resp.Status != 201 {
					t.Fatalf("first attempt: %+v", resp)
				}
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 3 {
				t.Fatalf("orders: %d, %v; want 3 (k1, k2 and the payment), each once", n, err)
			}
			if errs := log.errors(); len(errs) > 0 {
				t.Fatalf("errors errLog: %q", errs)
			}
		})
	}
}

// A lookup-claimed attempt whose handler ran a failing statement aborts
// on the connection it had: nothing is closed, nothing errLog as an
// error, and no connection goes back to the pool with a transaction open
// or the key's claim held. Run in pgx's default mode, which prepares
// statements: one prepared in the aborted transaction would be refused.
func TestFailingAttemptsReuseConnections(t *testing.T) {
	ctx := context.Background()
	const size = 4
	pool := newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = size })
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	before := pool.Stat().NewConnsCount()
	for i := range 100 {
		_, err := e.Serve(keyed(fmt.Sprintf("k%d", i)), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			_, err := at.Tx().Exec(ctx, `SELECT 1 / $1::int`, 0)
			return nil, err
		})
		if err == nil || !strings.Contains(err.Error(), "division by zero") {
			t.Fatalf("attempt %d: %v, want the handler's own error", i, err)
		}
	}
	if opened := pool.Stat().NewConnsCount() - before; opened > size {
		t.Errorf("100 failing attempts opened %d connections, want at most the pool's %d", opened, size)
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("errors errLog: %q", errs)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Errorf("%d advisory locks held after the attempts ended, want 0", n)
	}
	conns := make([]*pgxpool.Conn, 0, size)
	for range size {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("a pooled connection is in transaction status %q, want idle", st)
		}
	}
	for _, c := range conns {
		c.Release()
	}
	// The keys are free for their retries.
	resp, err := e.Serve(keyed("k0"), op, []byte("a"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		return created("{}"), nil
	})
	if err != nil || resp.Status != 201 {
		t.Fatalf("retry: %+v, %v", resp, err)
	}
}

// A failing phase releases its lease even after the phases before it ran
// for longer than one lease together: each end of an attempt gets a bound
// of its own, so the client's immediate retry resumes instead of a 409.
func TestPhasedReleaseAfterLongPhases(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	pool := newPool(t, nil)
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
	// The lease is the bound on ending an attempt (at least a second);
	// three phases that each take 0.4 of it take 1.2 leases together.
	const lease = time.Second
	op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: lease, RecoveryPoints: []string{"a", "b"}}
	var runs []string
	fail := true
	phases := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
		runs = append(runs, at.RecoveryPoint())
		// The phase's own work, which takes time: what the test is about.
		time.Sleep(lease * 4 / 10)
		switch at.RecoveryPoint() {
		case "":
			return "a", nil, nil
		case "a":
			return "b", nil, nil
		}
		if fail {
			return "", nil, errors.New("the provider timed out")
		}
		return "", created("{}"), nil
	}
	if _, err := e.ServePhased(keyed("p1"), op, []byte("a"), phases); err == nil {
		t.Fatal("the failing attempt returned no error")
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Fatalf("errors errLog: %q", errs)
	}
	fail = false
	resp, err := e.ServePhased(keyed("p1"), op, []byte("a"), phases)
	if err != nil || resp.Status != 201 {
		t.Fatalf("the immediate retry: %+v, %v; want it to resume and answer 201", resp, err)
	}
	if got := strings.Join(runs, ","); got != ",a,b,b" {
		t.Fatalf("phases run from %q, want the retry to resume at b", got)
	}
}

// Joined header values are not one key: a proxy that merges repeated
// header lines must not turn a 400 into an accepted key.
func TestJoinedHeaderValues(t *testing.T) {
	pool := newPool(t, nil)
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute, ScopeHeader: "X-Account-Id"}
	ran := false
	h := func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		ran = true
		return created("{}"), nil
	}
	for _, tc := range []struct{ name, key, scope string }{
		{"key", "a, b", "acct_1"},
		{"quoted keys", `"a", "b"`, "acct_1"},
		{"scope", "k1", "acct_1, acct_2"},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set(idem.HeaderKey, tc.key)
		r.Header.Set("X-Account-Id", tc.scope)
		resp, err := e.Serve(idem.WithRequest(context.Background(), r), op, []byte("a"), h)
		if err != nil || resp.Status != 400 || !bytes.Contains(resp.Body, []byte("comma")) {
			t.Errorf("%s joined by a comma: %+v, %v; want a 400 that says so", tc.name, resp, err)
		}
	}
	if ran {
		t.Fatal("the handler ran")
	}
}

// answer is a response's status and problem type.
func answerOf(t *testing.T, resp *idem.Response) string {
	t.Helper()
	if resp == nil {
		return "no response"
	}
	return fmt.Sprintf("%d %s", resp.Status, strings.TrimPrefix(problemType(t, resp), idem.ProblemBase))
}

// The handler's own transaction failing at COMMIT is the handler's: a
// deferred constraint and a statement whose failure the handler ignored
// are a commit-failed 500 logged every time, a serialization failure a
// 500 with a retry hint, and none of them is called a misconfiguration.
func TestCommitErrorsAreNotMisconfiguration(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	for _, ddl := range []string{
		`CREATE TABLE parents (id int PRIMARY KEY)`,
		`CREATE TABLE children (parent int REFERENCES parents DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE TABLE tally (n int)`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	serve := func(key string, h idem.Handler[pgx.Tx]) *idem.Response {
		t.Helper()
		resp, err := e.Serve(keyed(key), op, []byte("a"), h)
		if err != nil {
			t.Fatalf("%s: %v, want an answer", key, err)
		}
		return resp
	}
	orphan := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		_, err := at.Tx().Exec(ctx, `INSERT INTO children VALUES (42)`)
		return created("{}"), err
	}
	for i := range 2 {
		if got := answerOf(t, serve(fmt.Sprintf("deferred-%d", i), orphan)); got != "500 commit-failed" {
			t.Fatalf("deferred constraint at COMMIT: %s, want 500 commit-failed", got)
		}
	}
	ignored := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		_, _ = at.Tx().Exec(ctx, `SELECT 1 / $1::int`, 0) // its error ignored
		return created("{}"), nil
	}
	if got := answerOf(t, serve("ignored", ignored)); got != "500 commit-failed" {
		t.Fatalf("a failed statement ignored: %s, want 500 commit-failed", got)
	}
	if errs := log.errors(); len(errs) != 3 || slicesContain(errs, "misconfigured") {
		t.Fatalf("errors logged: %q, want one per failed commit and none about the store's configuration", errs)
	}

	// A serialization failure: the attempt and a concurrent transaction
	// each read the tally and then add to it; the other commits first.
	other, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `SELECT count(*) FROM tally`); err != nil {
		t.Fatal(err)
	}
	resp := serve("conflict", func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		if _, err := at.Tx().Exec(ctx, `SET TRANSACTION ISOLATION LEVEL SERIALIZABLE`); err != nil {
			return nil, err
		}
		if _, err := at.Tx().Exec(ctx, `INSERT INTO tally SELECT count(*) FROM tally`); err != nil {
			return nil, err
		}
		if _, err := other.Exec(ctx, `INSERT INTO tally SELECT count(*) FROM tally`); err != nil {
			return nil, err
		}
		if err := other.Commit(ctx); err != nil {
			return nil, err
		}
		return created("{}"), nil
	})
	if got := answerOf(t, resp); got != "500 transaction-conflict" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("serialization failure at COMMIT: %s %v, want 500 transaction-conflict with Retry-After", got, resp.Header)
	}
	// Nothing of the failed attempts holds its key.
	if got := answerOf(t, serve("deferred-0", func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) { return created("{}"), nil })); got != "201 " {
		t.Fatalf("retry after a failed commit: %s, want 201", got)
	}
}

func slicesContain(msgs []string, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

// A client that hangs up while its handler runs cancels the attempt: it
// rolls back, is logged as a client cancel (not an outage, not a handler
// failure) and leaves the key free.
func TestClientCancelIsNotAnOutage(t *testing.T) {
	pool := newPool(t, nil)
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	pay := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"a"}}
	for _, phased := range []bool{false, true} {
		ctx, cancel := context.WithCancel(keyed(fmt.Sprintf("k-%v", phased)))
		work := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) error {
			if _, err := at.Tx().Exec(ctx, `SELECT 1`); err != nil {
				return err
			}
			cancel() // the client hangs up while the work runs
			_, err := at.Tx().Exec(ctx, `SELECT pg_sleep(30)`)
			return err
		}
		var resp *idem.Response
		var err error
		if phased {
			resp, err = e.ServePhased(ctx, pay, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
				return "", nil, work(ctx, at)
			})
		} else {
			resp, err = e.Serve(ctx, op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				return nil, work(ctx, at)
			})
		}
		if err != nil || answerOf(t, resp) != "499 client-closed-request" {
			t.Fatalf("phased %v: %+v, %v; want the 499 of a client cancel", phased, resp, err)
		}
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Fatalf("errors logged for client cancels: %q", errs)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Fatalf("%d advisory locks held, want 0", n)
	}
	resp, err := e.Serve(keyed("k-false"), op, []byte("a"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) { return created("{}"), nil })
	if err != nil || resp.Status != 201 {
		t.Fatalf("retry: %+v, %v; want the key free", resp, err)
	}
}

// Work that overruns its lease is ended by PostgreSQL's idle timeout,
// which the lease sets: the answer and the log name the overrun, not an
// outage, since every retry would meet the same.
func TestLeaseOverrunIsNamed(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	pool := newPool(t, nil)
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Second}
	resp, err := e.Serve(keyed("k"), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		if _, err := at.Tx().Exec(ctx, `SELECT 1`); err != nil {
			return nil, err
		}
		// A foreign call slower than the lease, the transaction idle.
		time.Sleep(1500 * time.Millisecond)
		_, err := at.Tx().Exec(ctx, `SELECT 1`)
		return created("{}"), err
	})
	if err != nil || answerOf(t, resp) != "500 lease-overrun" || !bytes.Contains(resp.Body, []byte("lease of 1s")) {
		t.Fatalf("%+v, %v; want a 500 lease-overrun naming the lease", resp, err)
	}
	if errs := log.errors(); len(errs) != 1 || !strings.Contains(errs[0], "overran its lease") {
		t.Fatalf("errors logged: %q, want one naming the overrun", errs)
	}
}

// Work still running StoreTimeout past its lease, with the store
// answering, has its context ended and is answered as the overrun it is,
// whether it waits on its own statement or on a foreign call: not as an
// outage, and with nothing stored.
func TestWorkPastLeaseIsOverrun(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	for _, tc := range []struct {
		name string
		work func(ctx context.Context, tx pgx.Tx) error
	}{
		{"busy statement", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_sleep(60)`)
			return err
		}},
		{"foreign call", func(ctx context.Context, tx pgx.Tx) error {
			<-ctx.Done()
			return fmt.Errorf("provider: %w", ctx.Err())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t, nil)
			log := &errLog{}
			e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(log), StoreTimeout: 2 * time.Second})
			op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Second}
			resp, err := e.Serve(keyed("k"), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
				return created("{}"), tc.work(ctx, at.Tx())
			})
			if err != nil || answerOf(t, resp) != "500 lease-overrun" || !bytes.Contains(resp.Body, []byte("lease of 1s")) {
				t.Fatalf("%+v, %v; want a 500 lease-overrun naming the lease", resp, err)
			}
			if errs := log.errors(); len(errs) != 1 || !strings.Contains(errs[0], "overran its lease") {
				t.Fatalf("errors logged: %q, want one naming the overrun", errs)
			}
			var rows int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&rows); err != nil || rows != 0 {
				t.Fatalf("%d key rows (%v), want none stored", rows, err)
			}
		})
	}
}

// A request that finds no connection free within the acquire bound is
// told the store is busy, and logged as a warning, not an error.
func TestNoFreeConnectionIsBusy(t *testing.T) {
	pool := newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	log := &errLog{}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{AcquireTimeout: 100 * time.Millisecond}), idem.Options{Logger: slog.New(log)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	running, finish := make(chan struct{}), make(chan struct{})
	done := make(chan *idem.Response)
	go func() {
		resp, _ := e.Serve(keyed("k1"), op, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			close(running)
			<-finish
			return created("{}"), nil
		})
		done <- resp
	}()
	select {
	case <-running:
	case first := <-done:
		t.Fatalf("the first attempt ended without running: %+v", first)
	}
	resp, err := e.Serve(keyed("k2"), op, []byte("a"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) { return created("{}"), nil })
	close(finish)
	if first := <-done; first == nil || first.Status != 201 {
		t.Fatalf("the attempt holding the connection: %+v", first)
	}
	if err != nil || answerOf(t, resp) != "503 store-busy" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%+v, %v; want a 503 store-busy with Retry-After", resp, err)
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Fatalf("errors logged: %q, want a warning only", errs)
	}
}

// A handler that runs no statement of its own still runs once per key:
// its key's row commits before the claim is released, though no
// transaction was begun for it. A deferred trigger makes the key row's
// commit slow, so that a duplicate sent as soon as the claim is released
// would find no row if the release came first.
func TestStatementlessHandlerRunsOnce(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	for _, ddl := range []string{
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON idempotency_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	var runs atomic.Int32
	ran := make(chan struct{}, 1)
	handler := func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		runs.Add(1)
		ran <- struct{}{}
		return created("{}"), nil
	}
	first := make(chan *idem.Response)
	go func() {
		resp, _ := e.Serve(keyed("k"), op, []byte("a"), handler)
		first <- resp
	}()
	// Once the first attempt's handler has run, wait until its claim is
	// released: only then may a duplicate find the key free.
	<-ran
	for advisoryLocks(t, pool) > 0 {
	}
	dup, err := e.Serve(keyed("k"), op, []byte("a"), handler)
	if resp := <-first; resp == nil || resp.Status != 201 {
		t.Fatalf("first attempt: %+v", resp)
	}
	if err != nil || !dup.Replayed || runs.Load() != 1 {
		t.Fatalf("the duplicate sent once the key's claim was released: %+v, %v; the handler ran %d times, want once and a replay", dup, err, runs.Load())
	}
}

// What a claim requires of a row is one rule: idem.Claimable, which the
// in-memory store applies, and the SQL function idemgen_claimable, which
// the Postgres store's claims apply, agree on every row state and claim.
func TestClaimableAgreesWithSQL(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	checked := 0
	for _, found := range []bool{false, true} {
		for _, status := range []string{"in_flight", "completed", "expired"} {
			for _, expired := range []bool{false, true} {
				for _, leasePassed := range []bool{false, true} {
					for _, takeover := range []bool{false, true} {
						for _, expect := range []int64{0, 1, 2} {
							row := idem.RowState{Found: found, Terminal: status != "in_flight", Attempt: 1,
								Expired: expired || status == "expired", LeasePassed: leasePassed}
							c := idem.Claim{Attempt: expect, Takeover: takeover}
							want := idem.Claimable(row, c)
							// A row emptied by the reaper is past its TTL.
							expiresAt := time.Now().Add(time.Hour)
							if row.Expired {
								expiresAt = time.Now().Add(-time.Hour)
							}
							lockedUntil := time.Now().Add(time.Hour)
							if leasePassed {
								lockedUntil = time.Now().Add(-time.Hour)
							}
							var got bool
							err := pool.QueryRow(ctx, `SELECT idemgen_claimable($1, $2, $3, $4, $5, $6, $7)`,
								found, status, lockedUntil, expiresAt, int32(1), int32(expect), takeover).Scan(&got)
							if err != nil {
								t.Fatal(err)
							}
							if got != want {
								t.Errorf("row %+v (status %s), claim %+v: SQL says %v, Go %v", row, status, c, got, want)
							}
							checked++
						}
					}
				}
			}
		}
	}
	if checked != 144 {
		t.Fatalf("checked %d cases", checked)
	}
}
