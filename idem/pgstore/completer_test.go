package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// charge is the request of the tests' phased payment.
type charge struct {
	Amount int `json:"amount"`
}

// payments is a phased operation whose second phase charges (a row in
// charges, in the phase's transaction) and responds 201 with the amount.
// fail makes the second phase fail, as when its process dies: the attempt
// is left in flight at "created".
type payments struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	runs int // second phases run, committed or not
	fail bool
}

func (p *payments) phases(req charge) idem.PhaseFunc[pgx.Tx] {
	return func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
		if at.RecoveryPoint() == "" {
			return "created", nil, nil
		}
		p.mu.Lock()
		p.runs++
		fail := p.fail
		p.mu.Unlock()
		if fail {
			return "", nil, errors.New("the process died after the charge")
		}
		if _, err := at.Tx().Exec(ctx, `INSERT INTO charges (key, amount) VALUES ($1, $2)`, at.Key(), req.Amount); err != nil {
			return "", nil, err
		}
		return "", func(w http.ResponseWriter) error {
			w.WriteHeader(http.StatusCreated)
			_, err := fmt.Fprintf(w, `{"charged":%d}`, req.Amount)
			return err
		}, nil
	}
}

func (p *payments) completable(op *idem.Operation) idem.Completable[pgx.Tx] {
	return idem.Completable[pgx.Tx]{Operation: op, Phases: func(_ context.Context, raw []byte) (idem.PhaseFunc[pgx.Tx], error) {
		var req charge
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		return p.phases(req), nil
	}}
}

func newPayments(t *testing.T) *payments {
	pool := newPool(t, nil)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE charges (key text PRIMARY KEY, amount int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &payments{pool: pool}
}

var quietLog = slog.New(slog.DiscardHandler)

// abandon leaves the attempt of key in flight at "created", its lease
// released, with its request kept: what a client that gave up after a
// failure leaves, and what a crash leaves once the lease has passed.
func (p *payments) abandon(t *testing.T, e *idem.Engine[pgx.Tx], op *idem.Operation, key string, amount int) {
	t.Helper()
	p.mu.Lock()
	p.fail = true
	p.mu.Unlock()
	defer func() { p.mu.Lock(); p.fail = false; p.mu.Unlock() }()
	req := charge{Amount: amount}
	if _, err := e.ServePhasedRequest(keyed(key), op, []byte(fmt.Sprint(amount)), req, p.phases(req)); err == nil {
		t.Fatalf("%s: the failing phase was answered", key)
	}
}

func (p *payments) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A payment abandoned after its charge phase began, with no client retry,
// is completed by the completer: one charge, one stored 201, which the
// client's late retry replays without running anything.
func TestCompleterFinishesAbandoned(t *testing.T) {
	p := newPayments(t)
	e := idem.NewEngine(pgstore.New(p.pool, pgstore.Options{}), idem.Options{Logger: quietLog})
	op := &idem.Operation{Name: "pay", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"created"}, Abandoned: idem.AbandonedComplete}
	// An older attempt abandoned before the operation was completed, so
	// without its request: it cannot be resumed, and must not crowd the
	// one that can out of a batch of one.
	plain := *op
	plain.Abandoned = ""
	p.abandon(t, e, &plain, "k0", 100)
	p.abandon(t, e, op, "k1", 1250)
	if n := p.count(t, `SELECT count(*) FROM idempotency_keys WHERE status = 'in_flight' AND request IS NOT NULL`); n != 1 {
		t.Fatalf("%d in-flight rows with their request, want 1", n)
	}
	var runs []idem.CompleterRun
	c := idem.NewCompleter(e, []idem.Completable[pgx.Tx]{p.completable(op)}, idem.CompleterOptions{
		CompleteAfter: time.Millisecond, BatchSize: 1, OnRun: func(r idem.CompleterRun) { runs = append(runs, r) }})
	// The lease was released at once; a millisecond later it counts as
	// abandoned. Until then a run finds nothing, which is fine too.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if r := c.RunOnce(context.Background()); r.Err != nil || r.Completed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not completed: runs %+v", runs)
		}
	}
	last := runs[len(runs)-1]
	if last.Err != nil || last.Completed != 1 || last.Found != 1 {
		t.Fatalf("run %+v, want the one attempt completed", last)
	}
	if n := p.count(t, `SELECT count(*) FROM charges WHERE key = 'k1' AND amount = 1250`); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if n := p.count(t, `SELECT count(*) FROM idempotency_keys WHERE status = 'completed' AND response_status = 201 AND request IS NULL`); n != 1 {
		t.Fatalf("%d completed rows with a 201 and no request left, want 1", n)
	}
	if n := p.count(t, `SELECT count(*) FROM idempotency_keys WHERE key = 'k0' AND status = 'in_flight'`); n != 1 {
		t.Fatal("the attempt without its request was not left for a retry or the sweeper")
	}
	before := p.runs
	req := charge{Amount: 1250}
	resp, err := e.ServePhasedRequest(keyed("k1"), op, []byte("1250"), req, p.phases(req))
	if err != nil || resp.Status != 201 || !resp.Replayed || string(resp.Body) != `{"charged":1250}` {
		t.Fatalf("the client's retry: %+v, %v; want the stored 201 replayed", resp, err)
	}
	if p.runs != before {
		t.Fatal("the retry ran a phase")
	}
	// Nothing is left for another run.
	if r := c.RunOnce(context.Background()); r.Found != 0 || r.Err != nil {
		t.Fatalf("a later run: %+v", r)
	}
}

// Four instances run their completers at the same moment over the same
// abandoned attempts: each attempt is completed once, its charge made
// once, and the instances' counts add up.
func TestCompleterRunsOnceAcrossInstances(t *testing.T) {
	p := newPayments(t)
	op := &idem.Operation{Name: "pay", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"created"}, Abandoned: idem.AbandonedComplete}
	const keys, instances = 20, 4
	first := idem.NewEngine(pgstore.New(p.pool, pgstore.Options{}), idem.Options{Logger: quietLog})
	for i := range keys {
		p.abandon(t, first, op, fmt.Sprintf("k%d", i), 100+i)
	}
	p.runs = 0
	cfg := p.pool.Config()
	var completers []*idem.Completer[pgx.Tx]
	for range instances {
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg.Copy())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: quietLog})
		completers = append(completers, idem.NewCompleter(e, []idem.Completable[pgx.Tx]{p.completable(op)}, idem.CompleterOptions{CompleteAfter: time.Millisecond}))
	}
	// Wait until every attempt counts as abandoned, so that each instance
	// lists them all.
	for deadline := time.Now().Add(10 * time.Second); p.count(t, `SELECT count(*) FROM idempotency_keys WHERE locked_until <= now() - interval '1 millisecond'`) < keys; {
		if time.Now().After(deadline) {
			t.Fatal("the leases did not pass")
		}
	}
	start := make(chan struct{})
	results := make([]idem.CompleterRun, instances)
	var wg sync.WaitGroup
	for i, c := range completers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = c.RunOnce(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	completed, found := 0, 0
	for _, r := range results {
		if r.Err != nil || r.Errored != 0 {
			t.Fatalf("run %+v", r)
		}
		completed += r.Completed
		found += r.Found
	}
	if completed != keys {
		t.Errorf("%d completed across instances, want %d: %+v", completed, keys, results)
	}
	if found < keys {
		t.Errorf("the instances found %d attempts in all, want at least %d", found, keys)
	}
	if p.runs != keys {
		t.Errorf("the charge phase ran %d times, want %d", p.runs, keys)
	}
	if n := p.count(t, `SELECT count(*) FROM charges`); n != keys {
		t.Errorf("%d charges, want %d", n, keys)
	}
	if n := p.count(t, `SELECT count(*) FROM idempotency_keys WHERE status = 'completed' AND response_status = 201`); n != keys {
		t.Errorf("%d completed keys, want %d", n, keys)
	}
}

// An operation annotated abandoned: fail gets the attempt-abandoned
// problem stored instead: no phase runs again, and the client's late
// retry is told, in the API's error shape, what happened.
func TestAbandonedFail(t *testing.T) {
	p := newPayments(t)
	shape := &idem.ErrorShape{Envelope: "error", Code: "code", Detail: "message"}
	e := idem.NewEngine(pgstore.New(p.pool, pgstore.Options{}), idem.Options{Logger: quietLog, Problems: shape})
	op := &idem.Operation{Name: "pay", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"created"}, Abandoned: idem.AbandonedFail}
	p.abandon(t, e, op, "k1", 1250)
	if n := p.count(t, `SELECT count(*) FROM idempotency_keys WHERE request IS NOT NULL`); n != 0 {
		t.Fatalf("%d rows keep a request, though the operation is not completed", n)
	}
	runs := p.runs
	c := idem.NewCompleter(e, []idem.Completable[pgx.Tx]{{Operation: op}}, idem.CompleterOptions{CompleteAfter: time.Millisecond})
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := c.RunOnce(context.Background())
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Failed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not failed: %+v", r)
		}
	}
	if p.runs != runs {
		t.Fatal("a phase ran")
	}
	req := charge{Amount: 1250}
	resp, err := e.ServePhased(keyed("k1"), op, []byte("1250"), p.phases(req))
	if err != nil || resp.Status != 500 || !resp.Replayed {
		t.Fatalf("the client's retry: %+v, %v; want the stored 500", resp, err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil || body.Error.Code != "attempt-abandoned" || body.Error.Message == "" {
		t.Fatalf("stored answer %s, want the attempt-abandoned problem in the API's shape", resp.Body)
	}
	if n := p.count(t, `SELECT count(*) FROM charges`); n != 0 {
		t.Fatalf("%d charges, want none", n)
	}
}
