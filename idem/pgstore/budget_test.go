package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestRoundTripBudget counts the round trips each outcome makes, with
// pgx's statement cache warm. It pins the budget of DESIGN.md: replay, 409
// and 422 are one read-only statement; a first execution commits once,
// with the handler's insert inside, in two protocol round trips besides
// the handler's: the lookup, which claims the free key, and the key row
// (the key's only write) with COMMIT and the key's release. BEGIN rides
// with the handler's first statement.
func TestRoundTripBudget(t *testing.T) {
	ctx := context.Background()
	trace := &statements{}
	pool := newPool(t, trace)
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text)`); err != nil {
		t.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	handler := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ($1)`, at.Key()); err != nil {
			return nil, err
		}
		return func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, err := w.Write([]byte(`{"id":1}`))
			return err
		}, nil
	}
	serve := func(key string, fp string) *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, key)
		resp, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte(fp), handler)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Warm up: the first use of a query on a connection also prepares it.
	for i := range 3 {
		serve("warm"+string(rune('a'+i)), "fp")
		serve("warm"+string(rune('a'+i)), "fp")
	}
	trace.take()

	check := func(name string, wantStatus int, want []string, resp *idem.Response) {
		t.Helper()
		got := trace.take()
		if resp.Status != wantStatus {
			t.Errorf("%s: status %d, want %d", name, resp.Status, wantStatus)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: statements %v, want %v", name, got, want)
		}
		commits := 0
		for _, s := range got {
			if slices.Contains(strings.Split(s, "+"), "commit") {
				commits++
			}
		}
		t.Logf("%-16s %d round trips, %d commits: %v", name, len(got), commits, got)
	}

	check("first execution", 201, []string{"select", "begin+insert", "with+commit"}, serve("k1", "fp"))

	var xmin1, xmax1, xmin2, xmax2 string
	rowVersion := `SELECT xmin::text, xmax::text FROM idempotency_keys WHERE key = 'k1'`
	if err := pool.QueryRow(ctx, rowVersion).Scan(&xmin1, &xmax1); err != nil {
		t.Fatal(err)
	}
	trace.take()
	check("replay", 201, []string{"select"}, serve("k1", "fp"))
	check("422", 422, []string{"select"}, serve("k1", "other"))
	if err := pool.QueryRow(ctx, rowVersion).Scan(&xmin2, &xmax2); err != nil {
		t.Fatal(err)
	}
	trace.take()
	if xmin1 != xmin2 || xmax1 != xmax2 {
		t.Errorf("replay and 422 touched the row: xmin/xmax %s/%s -> %s/%s", xmin1, xmax1, xmin2, xmax2)
	}

	// Behind a pooler in transaction mode a claim stays inside its
	// transaction: BEGIN with the claim, a round trip more.
	pooled := idem.NewEngine(pgstore.New(pool, pgstore.Options{TransactionPooling: true}), idem.Options{})
	var resp *idem.Response
	for _, key := range []string{"pooled-warm", "pooled"} { // the first also reads the derived-key secret
		trace.take()
		r := httptest.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, key)
		var err error
		if resp, err = pooled.Serve(idem.WithRequest(ctx, r), op, []byte("fp"), handler); err != nil {
			t.Fatal(err)
		}
	}
	check("first execution, TransactionPooling", 201, []string{"select", "begin+select", "insert", "with+commit"}, resp)

	held, err := pgstore.New(pool, pgstore.Options{}).Claim(ctx, idem.ID{Operation: "createOrder", Key: "k2"}, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Abort(ctx)
	trace.take()
	check("409", 409, []string{"select"}, serve("k2", "fp"))
}

// TestRoundTripBudgetPhased counts a phased first execution of three
// phases (two recovery points): the claim commits on its own, then each
// phase commits once, the last with the response: BEGIN with the phase's
// start, the handler's writes, the recovery point (or response) with
// COMMIT. Replays of a phased key
// cost what an atomic one's do: one read-only statement.
func TestRoundTripBudgetPhased(t *testing.T) {
	ctx := context.Background()
	trace := &statements{}
	pool := newPool(t, trace)
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (key text PRIMARY KEY, charge text)`); err != nil {
		t.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"payment_created", "charge_created"}}
	run := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
		switch at.RecoveryPoint() {
		case "":
			_, err := at.Tx().Exec(ctx, `INSERT INTO payments (key) VALUES ($1)`, at.Key())
			return "payment_created", nil, err
		case "payment_created":
			_, err := at.Tx().Exec(ctx, `UPDATE payments SET charge = $2 WHERE key = $1`, at.Key(), at.DerivedKey("charge"))
			return "charge_created", nil, err
		}
		return "", func(w http.ResponseWriter) error {
			w.WriteHeader(201)
			return nil
		}, nil
	}
	serve := func(key string) *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/payments", nil)
		r.Header.Set(idem.HeaderKey, key)
		resp, err := engine.ServePhased(idem.WithRequest(ctx, r), op, []byte("fp"), run)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 3 {
		serve("warm" + string(rune('a'+i)))
		serve("warm" + string(rune('a'+i)))
	}
	trace.take()

	resp := serve("k1")
	got := trace.take()
	phase := func(write ...string) []string {
		return append(append([]string{"begin+select"}, write...), "update+commit")
	}
	want := []string{"select", "with"} // lookup; the claim, committed on its own
	want = append(want, phase("insert")...)
	want = append(want, phase("update")...)
	want = append(want, phase()...)
	if resp.Status != 201 || !slices.Equal(got, want) {
		t.Fatalf("phased first execution: %d, statements %v, want %v", resp.Status, got, want)
	}
	// The claim commits as a statement of its own; each phase with COMMIT.
	commits := 1
	for _, s := range got {
		if strings.HasSuffix(s, "commit") {
			commits++
		}
	}
	if commits != 4 {
		t.Fatalf("%d commits, want 4", commits)
	}
	t.Logf("phased first execution: %d round trips (2 of them the handler's writes), %d commits: %v", len(got), commits, got)

	if r := serve("k1"); !r.Replayed {
		t.Fatalf("second request not replayed: %+v", r)
	}
	if got := trace.take(); !slices.Equal(got, []string{"select"}) {
		t.Fatalf("phased replay: statements %v, want one select", got)
	}
}

// outcomes records each request's outcome, as the engine's Tracer sees it.
type outcomes struct {
	mu   sync.Mutex
	seen []idem.TraceRequestEndData
}

func (o *outcomes) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}

// endKey holds a *idem.TraceRequestEndData in a request's context, for
// the tracer to fill: the request's own end, among concurrent ones.
type endKey struct{}

func (o *outcomes) TraceRequestEnd(ctx context.Context, d idem.TraceRequestEndData) {
	if end, ok := ctx.Value(endKey{}).(*idem.TraceRequestEndData); ok {
		*end = d
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, d)
}

func (o *outcomes) last(t *testing.T) idem.TraceRequestEndData {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		t.Fatal("the tracer saw no request")
	}
	return o.seen[len(o.seen)-1]
}

// TestStatementBudget holds the layer to DESIGN.md's budget, per outcome
// as the engine's tracer reports it, counting the statements PostgreSQL
// runs besides the handler's own: an atomic first execution runs at most
// four (the lookup that claims, BEGIN, the key row that hands the claim
// over, COMMIT) in two round trips besides the handler's, with one
// commit; a replay, 409 or 422 runs one read-only statement and commits
// nothing.
func TestStatementBudget(t *testing.T) {
	ctx := context.Background()
	trace := &statements{}
	pool := newPool(t, trace)
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, key text)`); err != nil {
		t.Fatal(err)
	}
	seen := &outcomes{}
	store := pgstore.New(pool, pgstore.Options{})
	engine := idem.NewEngine(store, idem.Options{Tracer: seen})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	handlerStatements := 0
	handler := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		handlerStatements++
		if _, err := at.Tx().Exec(ctx, `INSERT INTO orders (key) VALUES ($1)`, at.Key()); err != nil {
			return nil, err
		}
		return func(w http.ResponseWriter) error {
			w.WriteHeader(201)
			return nil
		}, nil
	}
	serve := func(key, fp string) {
		t.Helper()
		r := httptest.NewRequest("POST", "/orders", nil)
		r.Header.Set(idem.HeaderKey, key)
		if _, err := engine.Serve(idem.WithRequest(ctx, r), op, []byte(fp), handler); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // prepares the queries on the pool's connections
		serve(fmt.Sprint("warm", i), "fp")
		serve(fmt.Sprint("warm", i), "fp")
	}
	trace.take()

	type budget struct {
		outcome    idem.Outcome
		statements int // the layer's own
		roundTrips int // the layer's own, not counting those that carry a handler's statement
		commits    int
		readOnly   bool
	}
	check := func(name string, want budget, request func()) {
		t.Helper()
		handlerStatements = 0
		request()
		got := trace.take()
		end := seen.last(t)
		if end.Outcome != want.outcome {
			t.Errorf("%s: outcome %s, want %s", name, end.Outcome, want.outcome)
		}
		statements, roundTrips, commits, readOnly := 0, 0, 0, true
		for _, trip := range got {
			verbs := strings.Split(trip, "+")
			statements += len(verbs)
			if !slices.Contains(verbs, "insert") || !slices.Contains(verbs, "begin") {
				roundTrips++ // the handler's insert rides with BEGIN
			}
			for _, v := range verbs {
				switch v {
				case "commit":
					commits++
				case "select":
				default:
					readOnly = false
				}
			}
		}
		statements -= handlerStatements
		t.Logf("%-22s %-8s %d statements of its own, %d round trips, %d commits: %v", name, end.Outcome, statements, roundTrips, commits, got)
		if statements > want.statements || roundTrips > want.roundTrips || commits != want.commits || (want.readOnly && !readOnly) {
			t.Errorf("%s: %d statements, %d round trips, %d commits, read-only %v; want at most %d statements and %d round trips, %d commits, read-only %v",
				name, statements, roundTrips, commits, readOnly, want.statements, want.roundTrips, want.commits, want.readOnly)
		}
	}

	check("first execution", budget{idem.OutcomeFirst, 4, 2, 1, false}, func() { serve("k1", "fp") })
	check("replay", budget{idem.OutcomeReplay, 1, 1, 0, true}, func() { serve("k1", "fp") })
	check("422", budget{idem.OutcomeMismatch, 1, 1, 0, true}, func() { serve("k1", "other") })

	held, err := store.Claim(ctx, idem.ID{Operation: "createOrder", Key: "k2"}, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	trace.take()
	check("409", budget{idem.OutcomeConflict, 1, 1, 0, true}, func() { serve("k2", "fp") })
	if err := held.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	trace.take()
	// The key's held lock is gone with the abort: its first execution is
	// claimed by its lookup again.
	check("first after an abort", budget{idem.OutcomeFirst, 4, 2, 1, false}, func() { serve("k2", "fp") })
}

// TestRoundTripBudgetAccept counts an async operation's first request:
// the lookup, which claims the free key; BEGIN with the job's insert (here
// a statement of the test's, as River's InsertTx is one); the key's row,
// which takes the claim over, with COMMIT. One commit, three round trips,
// as an atomic first execution, and no handler. Its retries while it
// runs, and its status, are one read-only statement. Without the lookup's
// claim (a pooler in transaction mode), BEGIN rides with the claim that
// writes the row, and the COMMIT is a round trip of its own: four.
func TestRoundTripBudgetAccept(t *testing.T) {
	ctx := context.Background()
	trace := &statements{}
	pool := newPool(t, trace)
	if _, err := pool.Exec(ctx, `CREATE TABLE jobs (id serial PRIMARY KEY, key text)`); err != nil {
		t.Fatal(err)
	}
	store := pgstore.New(pool, pgstore.Options{})
	engine := idem.NewEngine(store, idem.Options{})
	op := &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: time.Minute, Async: true, StatusPath: "/exports/{key}"}
	enqueue := func(ctx context.Context, tx pgx.Tx, a idem.Accepted) error {
		_, err := tx.Exec(ctx, `INSERT INTO jobs (key) VALUES ($1)`, a.ID.Key)
		return err
	}
	accept := func(key string) *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/exports", nil)
		r.Header.Set(idem.HeaderKey, key)
		resp, err := engine.ServeAsync(idem.WithRequest(ctx, r), op, []byte("fp"), map[string]string{"format": "csv"}, enqueue)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 3 { // warm: the secret, and each query prepared once
		accept(fmt.Sprintf("warm%d", i))
	}
	trace.take()
	check := func(name string, wantStatus int, want []string, resp *idem.Response) {
		t.Helper()
		got := trace.take()
		if resp.Status != wantStatus || !slices.Equal(got, want) {
			t.Errorf("%s: %d with statements %v, want %d with %v", name, resp.Status, got, wantStatus, want)
		}
		t.Logf("%-10s %d round trips: %v", name, len(got), got)
	}
	check("accept", 202, []string{"select", "begin+insert", "with+commit"}, accept("k1"))
	check("in progress", 202, []string{"select"}, accept("k1"))
	r := httptest.NewRequest("GET", "/exports/k1", nil)
	status, err := engine.Status(idem.WithRequest(ctx, r), op, "k1")
	if err != nil {
		t.Fatal(err)
	}
	check("status", 200, []string{"select"}, status)
	var jobs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE key = 'k1'`).Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("%d jobs for k1 (%v), want 1", jobs, err)
	}

	// Store.Accept itself, as the engine uses it where the lookup did not
	// claim: BEGIN with the claim, the job, COMMIT.
	trace.take()
	err = store.Accept(ctx, idem.ID{Operation: op.Name, Key: "k2"}, idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Generation: 1, Request: []byte(`{}`)},
		func(ctx context.Context, tx pgx.Tx) error {
			return enqueue(ctx, tx, idem.Accepted{ID: idem.ID{Key: "k2"}, Generation: 1})
		})
	if got, want := trace.take(), []string{"begin+with", "insert", "commit"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Store.Accept: %v with statements %v, want %v", err, got, want)
	}
}

// An accept whose transaction sits idle past its bound, as one held up by
// a database that stopped answering, is ended by PostgreSQL with neither
// the key's row nor the job: the answer is a 503 to retry, not an internal
// error, and the retry is accepted.
func TestAcceptIdlePastBoundIsUnavailable(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, nil)
	if _, err := pool.Exec(ctx, `CREATE TABLE jobs (id serial PRIMARY KEY, key text)`); err != nil {
		t.Fatal(err)
	}
	engine := idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{})
	op := &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: time.Minute, Async: true, StatusPath: "/exports/{key}"}
	stall := true
	enqueue := func(ctx context.Context, tx pgx.Tx, a idem.Accepted) error {
		if _, err := tx.Exec(ctx, `INSERT INTO jobs (key) VALUES ($1)`, a.ID.Key); err != nil {
			return err
		}
		if stall {
			if _, err := tx.Exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = '10ms'`); err != nil {
				return err
			}
			// The time the transaction sits idle: what PostgreSQL's timeout
			// ends it for.
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}
	accept := func() *idem.Response {
		t.Helper()
		r := httptest.NewRequest("POST", "/exports", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		resp, err := engine.ServeAsync(idem.WithRequest(ctx, r), op, []byte("fp"), map[string]string{"format": "csv"}, enqueue)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := accept(); resp.Status != http.StatusServiceUnavailable || !strings.Contains(string(resp.Body), "store-unavailable") {
		t.Errorf("accept cut off idle: %d %s, want 503 store-unavailable", resp.Status, resp.Body)
	}
	var rows, jobs int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_keys WHERE key = 'k1'), (SELECT count(*) FROM jobs)`).Scan(&rows, &jobs); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || jobs != 0 {
		t.Errorf("%d rows and %d jobs left by the accept cut off, want none", rows, jobs)
	}
	stall = false
	if resp := accept(); resp.Status != http.StatusAccepted {
		t.Errorf("retry: %d %s, want 202", resp.Status, resp.Body)
	}
}
