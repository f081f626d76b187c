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
	h := func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) { ran = true; return created("{}"), nil }
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
