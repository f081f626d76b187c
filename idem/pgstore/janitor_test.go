package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/queries"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// How many rows seed inserts in each state. The counts are not multiples
// of the batch sizes, so the last batch of a run is a short one.
const (
	nCompleted        = 1000 // completed, TTL ahead
	nExpired          = 2300 // completed, TTL passed
	nLeased           = 700  // in flight, lease ahead
	nRecent           = 400  // in flight, lease ended minutes ago
	nAbandoned        = 2100 // in flight, lease ended hours ago
	nAbandonedExpired = 300  // in flight, lease ended and TTL passed

	nToFail = nAbandoned + nAbandonedExpired
)

// seed fills the key table with one statement per state. A row's key is
// its state's name, a slash and its number; scope is tenant-(number mod 7).
func seed(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, st := range []struct {
		name, status, lockedUntil, expiresAt string
		n                                    int
	}{
		{"completed", "completed", "NULL", "now() + interval '1 hour'", nCompleted},
		{"expired", "completed", "NULL", "now() - interval '1 minute' - i * interval '1 second'", nExpired},
		{"leased", "in_flight", "now() + interval '1 minute'", "now() + interval '1 day'", nLeased},
		{"recent", "in_flight", "now() - interval '5 minutes'", "now() + interval '1 day'", nRecent},
		{"abandoned", "in_flight", "now() - interval '2 hours' - i * interval '1 second'", "now() + interval '1 day'", nAbandoned},
		{"abandonedexpired", "in_flight", "now() - interval '30 hours'", "now() - interval '6 hours'", nAbandonedExpired},
	} {
		response := `NULL, NULL, NULL, 'charge_created', 1 + i % 3`
		if st.status == "completed" {
			response = `201, '{"Content-Type":["application/json"]}', convert_to('{"id":' || i || '}', 'UTF8'), '', 1`
		}
		sql := fmt.Sprintf(`INSERT INTO idempotency_keys
			(scope, operation, key, fingerprint, status, locked_until,
			 response_status, response_headers, response_body, recovery_point, attempt, expires_at, derived)
			SELECT 'tenant-' || i %% 7, 'createPayment', '%s/' || i, 'fp', '%s', %s, %s, %s, false
			FROM generate_series(1, $1::integer) AS i`,
			st.name, st.status, st.lockedUntil, response, st.expiresAt)
		if _, err := pool.Exec(context.Background(), sql, st.n); err != nil {
			t.Fatalf("seeding %s: %v", st.name, err)
		}
	}
}

// seeded is what tally returns right after seed.
func seeded() map[string]int {
	return map[string]int{
		"completed/completed/201":      nCompleted,
		"expired/completed/201":        nExpired,
		"leased/in_flight/0":           nLeased,
		"recent/in_flight/0":           nRecent,
		"abandoned/in_flight/0":        nAbandoned,
		"abandonedexpired/in_flight/0": nAbandonedExpired,
	}
}

// tally counts the table's rows by seeded state, status and response
// status, e.g. "abandoned/completed/500". Rows the test adds by hand have
// no slash in their key and count under the whole key.
func tally(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `
		SELECT split_part(key, '/', 1) || '/' || status || '/' || coalesce(response_status, 0), count(*)::int
		FROM idempotency_keys GROUP BY 1`)
	got := map[string]int{}
	var (
		k string
		n int
	)
	_, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { got[k] = n; return nil })
	if err != nil {
		t.Fatalf("tally: %v", err)
	}
	return got
}

// move moves n rows (all when n < 0) from one tally entry to another.
func move(m map[string]int, from, to string, n int) {
	if n < 0 {
		n = m[from]
	}
	m[from] -= n
	if m[from] == 0 {
		delete(m, from)
	}
	m[to] += n
}

func checkTally(t *testing.T, pool *pgxpool.Pool, want map[string]int) {
	t.Helper()
	if got := tally(t, pool); !maps.Equal(got, want) {
		t.Errorf("rows by state/status/response:\n got %v\nwant %v", got, want)
	}
}

func batches(n, size int) int { return (n + size - 1) / size }

// logs records what a logger receives, at every level.
type logs struct {
	mu   sync.Mutex
	recs []logged
}

type logged struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { panic("unused") }
func (l *logs) WithGroup(string) slog.Handler            { panic("unused") }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	rec := logged{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Any()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

func (l *logs) logger() *slog.Logger { return slog.New(l) }

// with returns the records with message msg.
func (l *logs) with(msg string) []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logged
	for _, r := range l.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// checkAbandonedRecord checks that rec is the stored attempt-abandoned
// problem, decoded as a client would.
func checkAbandonedRecord(t *testing.T, rec idem.Record) {
	t.Helper()
	if !rec.Completed || rec.Response == nil {
		t.Fatalf("record %+v, want completed with a response", rec)
	}
	if rec.Response.Status != 500 {
		t.Errorf("status %d, want 500", rec.Response.Status)
	}
	if ct := rec.Response.Header.Get("Content-Type"); ct != idem.ContentTypeProblem {
		t.Errorf("Content-Type %q, want %q", ct, idem.ContentTypeProblem)
	}
	var p idem.Problem
	if err := json.Unmarshal(rec.Response.Body, &p); err != nil {
		t.Fatalf("body %s: %v", rec.Response.Body, err)
	}
	if p.Type != idem.TypeAttemptAbandoned || p.Status != 500 || p.Title != "Attempt abandoned" {
		t.Errorf("problem %+v, want type %s, status 500", p, idem.TypeAttemptAbandoned)
	}
	for _, w := range []string{"stopped partway", "will not be resumed", "remains in effect", "state of the resource", "new request with a new Idempotency-Key"} {
		if !strings.Contains(p.Detail, w) {
			t.Errorf("detail %q does not say %q", p.Detail, w)
		}
	}
}

var liveClaim = idem.Claim{Fingerprint: []byte("fp"), TTL: time.Hour, Lease: time.Minute}

// ageLease makes id's committed lease look three hours over.
func ageLease(t *testing.T, pool *pgxpool.Pool, id idem.ID) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`UPDATE idempotency_keys SET locked_until = now() - interval '3 hours' WHERE scope = $1 AND operation = $2 AND key = $3`,
		id.Scope, id.Operation, id.Key); err != nil {
		t.Fatal(err)
	}
}

// hold locks id's row in a transaction of its own, as a running phase or
// claim would, until the returned transaction ends.
func hold(t *testing.T, pool *pgxpool.Pool, id idem.ID) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var n int
	if err := tx.QueryRow(context.Background(),
		`SELECT 1 FROM idempotency_keys WHERE scope = $1 AND operation = $2 AND key = $3 FOR UPDATE`,
		id.Scope, id.Operation, id.Key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return tx
}

// bounded gives a test's database calls a deadline, so that a janitor
// that waited for a held row fails the test instead of hanging it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Sweep with Fail stores the attempt-abandoned problem for exactly the
// attempts whose lease ended longer than AbandonedFor ago, in batches, and
// never touches a row a transaction holds.
func TestSweepFailsAbandonedAttempts(t *testing.T) {
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)

	// A phase running long past its lease: the committed lease looks over,
	// but the phase's transaction holds the row (and has a fresh lease
	// that is not committed yet).
	phaseID := idem.ID{Scope: "live", Operation: "createPayment", Key: "live-phase"}
	phaseLease, err := store.Lease(ctx, phaseID, liveClaim)
	if err != nil {
		t.Fatal(err)
	}
	ageLease(t, pool, phaseID)
	phase, err := phaseLease.Phase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phase.Abort(context.Background()) })

	// An abandoned attempt that another transaction holds right now.
	heldID := idem.ID{Scope: "live", Operation: "createPayment", Key: "live-held"}
	heldLease, err := store.Lease(ctx, heldID, liveClaim)
	if err != nil {
		t.Fatal(err)
	}
	ageLease(t, pool, heldID)
	holder := hold(t, pool, heldID)

	// A phased attempt between two phases, its lease running.
	leasedID := idem.ID{Scope: "live", Operation: "createPayment", Key: "live-lease"}
	if _, err := store.Lease(ctx, leasedID, liveClaim); err != nil {
		t.Fatal(err)
	}

	want := seeded()
	want["live-phase/in_flight/0"] = 1
	want["live-held/in_flight/0"] = 1
	want["live-lease/in_flight/0"] = 1
	checkTally(t, pool, want)

	log := &logs{}
	res, err := store.Sweep(ctx, pgstore.SweepOptions{Fail: true, BatchSize: 500, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if wantRes := (pgstore.SweepResult{Failed: nToFail, Batches: batches(nToFail, 500)}); res != wantRes {
		t.Errorf("Sweep = %+v, want %+v", res, wantRes)
	}
	move(want, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	move(want, "abandonedexpired/in_flight/0", "abandonedexpired/completed/500", -1)
	checkTally(t, pool, want)

	// A retry of a failed attempt gets the problem instead of resuming.
	rec, err := store.Lookup(ctx, idem.ID{Scope: "tenant-1", Operation: "createPayment", Key: "abandoned/1"})
	if err != nil {
		t.Fatal(err)
	}
	checkAbandonedRecord(t, rec)
	// One whose lease ended recently is still there to be taken over.
	rec, err = store.Lookup(ctx, idem.ID{Scope: "tenant-1", Operation: "createPayment", Key: "recent/1"})
	if err != nil || !rec.Found || rec.Completed || rec.LeaseLeft > 0 || rec.RecoveryPoint != "charge_created" {
		t.Errorf("Lookup(recent/1) = %+v, %v; want in flight at charge_created, lease passed", rec, err)
	}

	// Each failed attempt is logged with what finds it, then one summary.
	failed := log.with("idem: failed abandoned attempt")
	if len(failed) != nToFail {
		t.Errorf("%d failed attempts logged, want %d", len(failed), nToFail)
	}
	if len(failed) > 0 {
		r := failed[0]
		// The oldest lease goes first: an abandoned-and-expired row.
		if r.level != slog.LevelInfo || r.attrs["operation"] != "createPayment" ||
			!strings.HasPrefix(fmt.Sprint(r.attrs["key"]), "abandonedexpired/") || !strings.HasPrefix(fmt.Sprint(r.attrs["scope"]), "tenant-") ||
			r.attrs["recovery_point"] != "charge_created" || r.attrs["attempt"] == nil {
			t.Errorf("first failed attempt logged as %+v", r)
		}
		if ended, ok := r.attrs["lease_ended"].(time.Time); !ok || time.Since(ended) < 29*time.Hour {
			t.Errorf("lease_ended = %v, want about 30 hours ago", r.attrs["lease_ended"])
		}
	}
	summary := log.with("idem: swept abandoned attempts")
	if len(summary) != 1 || summary[0].level != slog.LevelInfo ||
		summary[0].attrs["failed"] != int64(nToFail) || summary[0].attrs["batches"] != int64(res.Batches) || summary[0].attrs["took"] == nil {
		t.Errorf("summary logged as %+v", summary)
	}

	// The running phase finishes as if no sweep had run.
	if err := phase.Complete(ctx, &idem.Response{Status: 201, Header: http.Header{}, Body: []byte(`{"id":"p"}`)}); err != nil {
		t.Fatalf("completing the running phase after a sweep: %v", err)
	}
	if rec, err := store.Lookup(ctx, phaseID); err != nil || !rec.Completed || rec.Response.Status != 201 {
		t.Errorf("Lookup(live-phase) = %+v, %v; want its own 201", rec, err)
	}
	if rec, err := store.Lookup(ctx, leasedID); err != nil || rec.Completed || rec.LeaseLeft <= 0 {
		t.Errorf("Lookup(live-lease) = %+v, %v; want in flight with its lease", rec, err)
	}

	// Once let go, the held attempt is failed by the next sweep, and the
	// attempt it belonged to has lost its lease.
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = store.Sweep(ctx, pgstore.SweepOptions{Fail: true, BatchSize: 500, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if wantRes := (pgstore.SweepResult{Failed: 1, Batches: 1}); res != wantRes {
		t.Errorf("second Sweep = %+v, want %+v", res, wantRes)
	}
	if _, err := heldLease.Phase(ctx); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("Phase of a swept attempt = %v, want ErrLeaseLost", err)
	}
	rec, err = store.Lookup(ctx, heldID)
	if err != nil {
		t.Fatal(err)
	}
	checkAbandonedRecord(t, rec)
	move(want, "live-held/in_flight/0", "live-held/completed/500", 1)
	move(want, "live-phase/in_flight/0", "live-phase/completed/201", 1)
	checkTally(t, pool, want)
}

// Without Fail, or with DryRun, Sweep counts and logs the abandoned
// attempts and changes nothing; so does Reap with DryRun.
func TestSweepAndReapReportOnly(t *testing.T) {
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)
	want := seeded()

	for _, tt := range []struct {
		name string
		opts pgstore.SweepOptions
		want int
	}{
		{"zero value", pgstore.SweepOptions{}, nToFail},
		{"fail dry run", pgstore.SweepOptions{Fail: true, DryRun: true, BatchSize: 7}, nToFail},
		{"shorter window", pgstore.SweepOptions{AbandonedFor: time.Minute, DryRun: true}, nToFail + nRecent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &logs{}
			tt.opts.Logger = log.logger()
			res, err := store.Sweep(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if wantRes := (pgstore.SweepResult{Abandoned: tt.want}); res != wantRes {
				t.Errorf("Sweep = %+v, want %+v", res, wantRes)
			}
			checkTally(t, pool, want)

			listed := log.with("idem: abandoned attempt")
			if len(listed) != 100 {
				t.Errorf("%d abandoned attempts logged, want the oldest 100", len(listed))
			}
			for _, r := range listed {
				if r.level != slog.LevelWarn || !strings.HasPrefix(fmt.Sprint(r.attrs["key"]), "abandonedexpired/") ||
					r.attrs["recovery_point"] != "charge_created" || r.attrs["lease_ended"] == nil {
					t.Errorf("abandoned attempt logged as %+v", r)
					break
				}
			}
			summary := log.with("idem: found abandoned attempts")
			if len(summary) != 1 || summary[0].level != slog.LevelInfo ||
				summary[0].attrs["abandoned"] != int64(tt.want) || summary[0].attrs["logged"] != int64(100) ||
				summary[0].attrs["dry_run"] != tt.opts.DryRun {
				t.Errorf("summary logged as %+v", summary)
			}
		})
	}

	log := &logs{}
	res, err := store.Reap(ctx, pgstore.ReapOptions{DryRun: true, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if wantRes := (pgstore.ReapResult{Deleted: nExpired}); res != wantRes {
		t.Errorf("Reap dry run = %+v, want %+v", res, wantRes)
	}
	if s := log.with("idem: found expired keys"); len(s) != 1 || s[0].attrs["expired"] != int64(nExpired) || s[0].attrs["dry_run"] != true {
		t.Errorf("dry run summary logged as %+v", s)
	}
	checkTally(t, pool, want)
}

// Reap deletes exactly the completed keys whose TTL has passed, in
// batches. A claim over an expired key writes nothing, so its old row is
// reaped too, and the attempt writes the key's next generation when it
// completes. In-flight rows past their TTL stay until a sweep fails them.
func TestReapDeletesExpiredKeys(t *testing.T) {
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)

	// A request reusing an expired key, its attempt still running.
	claimID := idem.ID{Scope: "tenant-1", Operation: "createPayment", Key: "expired/1"}
	expired, err := store.Lookup(ctx, claimID)
	if err != nil {
		t.Fatal(err)
	}
	c := liveClaim
	c.Attempt, c.Generation = expired.Attempt, expired.Generation+1
	txn, err := store.Claim(ctx, claimID, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = txn.Abort(context.Background()) })

	log := &logs{}
	res, err := store.Reap(ctx, pgstore.ReapOptions{BatchSize: 1000, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if wantRes := (pgstore.ReapResult{Deleted: nExpired, Batches: batches(nExpired, 1000)}); res != wantRes {
		t.Errorf("Reap = %+v, want %+v", res, wantRes)
	}
	want := seeded()
	delete(want, "expired/completed/201")
	checkTally(t, pool, want)
	summary := log.with("idem: reaped expired keys")
	if len(summary) != 1 || summary[0].level != slog.LevelInfo || summary[0].attrs["deleted"] != int64(res.Deleted) ||
		summary[0].attrs["batches"] != int64(res.Batches) || summary[0].attrs["took"] == nil {
		t.Errorf("summary logged as %+v", summary)
	}

	// The claim commits its new response, as the key's next generation.
	if err := txn.Complete(ctx, &idem.Response{Status: 201, Header: http.Header{}, Body: []byte(`{"id":"new"}`)}); err != nil {
		t.Fatalf("completing the claim after a reap: %v", err)
	}
	if rec, err := store.Lookup(ctx, claimID); err != nil || !rec.Completed || string(rec.Response.Body) != `{"id":"new"}` || rec.Generation != expired.Generation+1 {
		t.Errorf("Lookup(expired/1) = %+v, %v; want the new response, generation %d", rec, err, expired.Generation+1)
	}
	want["expired/completed/201"] = 1

	// Failed by a sweep, in-flight rows past their TTL are reaped next.
	if _, err := store.Sweep(ctx, pgstore.SweepOptions{Fail: true, Logger: log.logger()}); err != nil {
		t.Fatal(err)
	}
	res, err = store.Reap(ctx, pgstore.ReapOptions{Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if wantRes := (pgstore.ReapResult{Deleted: nAbandonedExpired, Batches: 1}); res != wantRes {
		t.Errorf("Reap after Sweep = %+v, want %+v", res, wantRes)
	}
	delete(want, "abandonedexpired/in_flight/0")
	move(want, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	checkTally(t, pool, want)
}

// Janitors running at once share the work: each row is failed or deleted
// by exactly one of them.
func TestConcurrentJanitorsShareTheWork(t *testing.T) {
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)
	const runners = 4
	log := &logs{}

	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		swept [runners]pgstore.SweepResult
		reap  [runners]pgstore.ReapResult
		errs  [runners]error
	)
	for i := range runners {
		wg.Go(func() {
			<-start
			swept[i], errs[i] = store.Sweep(ctx, pgstore.SweepOptions{Fail: true, BatchSize: 100, Logger: log.logger()})
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		total += swept[i].Failed
	}
	t.Logf("sweeps: %+v", swept)
	if total != nToFail {
		t.Errorf("runners failed %d attempts in all (%+v), want %d", total, swept, nToFail)
	}
	seen := map[string]int{}
	for _, r := range log.with("idem: failed abandoned attempt") {
		seen[fmt.Sprint(r.attrs["scope"], " ", r.attrs["key"])]++
	}
	if len(seen) != nToFail {
		t.Errorf("%d distinct attempts failed, want %d", len(seen), nToFail)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s failed %d times", k, n)
		}
	}
	want := seeded()
	move(want, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	move(want, "abandonedexpired/in_flight/0", "abandonedexpired/completed/500", -1)
	checkTally(t, pool, want)

	start = make(chan struct{})
	for i := range runners {
		wg.Go(func() {
			<-start
			reap[i], errs[i] = store.Reap(ctx, pgstore.ReapOptions{BatchSize: 100, Logger: log.logger()})
		})
	}
	close(start)
	wg.Wait()
	total = 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		total += reap[i].Deleted
	}
	t.Logf("reaps: %+v", reap)
	if wantDeleted := nExpired + nAbandonedExpired; total != wantDeleted {
		t.Errorf("runners deleted %d keys in all (%+v), want %d", total, reap, wantDeleted)
	}
	delete(want, "expired/completed/201")
	delete(want, "abandonedexpired/completed/500")
	checkTally(t, pool, want)
}

// cancelAfter cancels a context once the first statement named query (its
// sqlc name) has finished.
type cancelAfter struct {
	query  string
	cancel context.CancelFunc
}

type namedQuery struct{}

func (c *cancelAfter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, namedQuery{}, strings.HasPrefix(d.SQL, "-- name: "+c.query+" "))
}

func (c *cancelAfter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(namedQuery{}) == true && d.Err == nil && c.cancel != nil {
		c.cancel()
	}
}

// A sweep or reap whose context ends stops after the batch in progress and
// reports what it did.
func TestSweepAndReapStopBetweenBatches(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		query string
		run   func(context.Context, *pgstore.Store) (done, batches int, err error)
		done  int
		// moved changes seeded() into what the stopped run leaves.
		moved func(map[string]int)
	}{
		{
			query: "FailAbandoned",
			run: func(ctx context.Context, s *pgstore.Store) (int, int, error) {
				res, err := s.Sweep(ctx, pgstore.SweepOptions{Fail: true, BatchSize: 500, Logger: quiet})
				return res.Failed, res.Batches, err
			},
			done: 500,
			// The oldest leases go first.
			moved: func(m map[string]int) {
				move(m, "abandonedexpired/in_flight/0", "abandonedexpired/completed/500", -1)
				move(m, "abandoned/in_flight/0", "abandoned/completed/500", 500-nAbandonedExpired)
			},
		},
		{
			query: "ReapExpired",
			run: func(ctx context.Context, s *pgstore.Store) (int, int, error) {
				res, err := s.Reap(ctx, pgstore.ReapOptions{BatchSize: 1000, Logger: quiet})
				return res.Deleted, res.Batches, err
			},
			done:  1000,
			moved: func(m map[string]int) { m["expired/completed/201"] -= 1000 },
		},
	} {
		t.Run(tt.query, func(t *testing.T) {
			tracer := &cancelAfter{query: tt.query}
			pool := newPool(t, tracer)
			seed(t, pool)
			ctx, cancel := context.WithCancel(bounded(t))
			defer cancel()
			tracer.cancel = cancel
			done, n, err := tt.run(ctx, pgstore.New(pool, pgstore.Options{}))
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "pgstore: ") {
				t.Errorf("err = %v, want a wrapped context.Canceled", err)
			}
			if done != tt.done || n != 1 {
				t.Errorf("did %d rows in %d batches, want %d in 1", done, n, tt.done)
			}
			want := seeded()
			tt.moved(want)
			checkTally(t, pool, want)
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	ctx := bounded(t)
	store := pgstore.New(newPool(t, nil), pgstore.Options{})
	quiet := slog.New(slog.DiscardHandler)
	for name, err := range map[string]error{
		"negative sweep batch": func() error {
			_, err := store.Sweep(ctx, pgstore.SweepOptions{BatchSize: -1, Logger: quiet})
			return err
		}(),
		"huge sweep batch": func() error {
			_, err := store.Sweep(ctx, pgstore.SweepOptions{Fail: true, BatchSize: 1 << 40, Logger: quiet})
			return err
		}(),
		"negative window": func() error {
			_, err := store.Sweep(ctx, pgstore.SweepOptions{AbandonedFor: -time.Minute, Logger: quiet})
			return err
		}(),
		"negative reap batch": func() error {
			_, err := store.Reap(ctx, pgstore.ReapOptions{BatchSize: -5, Logger: quiet})
			return err
		}(),
		"negative interval":    pgstore.NewJanitor(store, pgstore.JanitorOptions{Interval: -time.Second, Logger: quiet}).Run(ctx),
		"janitor batch":        pgstore.NewJanitor(store, pgstore.JanitorOptions{Reap: pgstore.ReapOptions{BatchSize: -1}, Logger: quiet}).Run(ctx),
		"jitter over interval": pgstore.NewJanitor(store, pgstore.JanitorOptions{Interval: time.Second, Jitter: 2 * time.Second, Logger: quiet}).Run(ctx),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "pgstore: ") {
			t.Errorf("%s: err = %v, want a pgstore error", name, err)
		}
	}
}

// waitFor polls until cond holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// countRows returns the number of rows where cond holds.
func countRows(t *testing.T, pool *pgxpool.Pool, cond string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE `+cond).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runJanitor starts j and returns a function that stops it and returns
// what Run returned.
func runJanitor(t *testing.T, j *pgstore.Janitor) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	t.Cleanup(cancel)
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its context ended")
			return nil
		}
	}
}

// A janitor sweeps and reaps at once and then at every tick, until its
// context ends.
func TestJanitorRun(t *testing.T) {
	pool := newPool(t, nil)
	seed(t, pool)
	log := &logs{}
	stop := runJanitor(t, pgstore.NewJanitor(pgstore.New(pool, pgstore.Options{}), pgstore.JanitorOptions{
		Interval: 10 * time.Millisecond,
		Jitter:   -1,
		Sweep:    pgstore.SweepOptions{Fail: true},
		Logger:   log.logger(),
	}))

	waitFor(t, "expired keys to be reaped", func() bool {
		return countRows(t, pool, `expires_at <= now()`) == 0
	})
	// Later runs find nothing; that they happen shows it keeps ticking.
	waitFor(t, "three reaps", func() bool { return len(log.with("idem: reaped expired keys")) >= 3 })
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if errs := append(log.with("idem: janitor: sweep failed; retrying at the next run"), log.with("idem: janitor: reap failed; retrying at the next run")...); len(errs) > 0 {
		t.Errorf("janitor logged failures: %+v", errs)
	}
	want := seeded()
	delete(want, "expired/completed/201")
	delete(want, "abandonedexpired/in_flight/0")
	move(want, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	checkTally(t, pool, want)
}

// A failing run is logged and the janitor carries on: once the table
// exists, the next runs do their work.
func TestJanitorSurvivesFailingRuns(t *testing.T) {
	pool := pgtest.NewPool(t) // no migrations yet
	log := &logs{}
	stop := runJanitor(t, pgstore.NewJanitor(pgstore.New(pool, pgstore.Options{}), pgstore.JanitorOptions{
		Interval: 10 * time.Millisecond,
		Jitter:   -1,
		Logger:   log.logger(),
	}))
	waitFor(t, "two failed sweeps", func() bool {
		return len(log.with("idem: janitor: sweep failed; retrying at the next run")) >= 2
	})
	if fails := log.with("idem: janitor: reap failed; retrying at the next run"); len(fails) == 0 || fails[0].level != slog.LevelError ||
		!strings.Contains(fmt.Sprint(fails[0].attrs["error"]), "pgstore: reap:") {
		t.Errorf("reap failures logged as %+v", fails)
	}

	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	seed(t, pool)
	waitFor(t, "expired keys to be reaped", func() bool {
		return countRows(t, pool, `status = 'completed' AND expires_at <= now()`) == 0
	})
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// maintenance records what a MaintenanceTracer is told.
type maintenance struct {
	mu   sync.Mutex
	runs []idem.TraceMaintenanceData
}

func (m *maintenance) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}

func (m *maintenance) TraceRequestEnd(context.Context, idem.TraceRequestEndData) {}

func (m *maintenance) TraceMaintenance(_ context.Context, d idem.TraceMaintenanceData) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, d)
}

func (m *maintenance) seen() []idem.TraceMaintenanceData {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs
}

// runJanitorFor runs a janitor until it has reported n runs, and returns
// them. OnRun ends the janitor's context at the nth run, so no run follows.
func runJanitorFor(t *testing.T, store *pgstore.Store, opts pgstore.JanitorOptions, n int) []pgstore.JanitorRun {
	t.Helper()
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	var runs []pgstore.JanitorRun
	onRun := opts.OnRun
	opts.OnRun = func(r pgstore.JanitorRun) {
		if onRun != nil {
			onRun(r)
		}
		runs = append(runs, r)
		if len(runs) == n {
			cancel()
		}
	}
	if err := pgstore.NewJanitor(store, opts).Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if len(runs) != n {
		t.Fatalf("janitor reported %d runs before its deadline, want %d: %+v", len(runs), n, runs)
	}
	return runs
}

// OnRun and the tracer see what each run did: a report-only run, then a
// run that fails the abandoned attempts and reaps those past their TTL,
// then runs that find nothing.
func TestJanitorOnRun(t *testing.T) {
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)
	// Keys whose attempts derived keys are emptied, not deleted.
	const nDerived = 50
	if _, err := pool.Exec(bounded(t), `UPDATE idempotency_keys SET derived = true
		WHERE key LIKE 'expired/%' AND split_part(key, '/', 2)::int <= $1`, nDerived); err != nil {
		t.Fatal(err)
	}
	// Two, so that the janitor is told through idem.Tracers.
	tracer, other := &maintenance{}, &maintenance{}
	opts := pgstore.JanitorOptions{
		Interval: time.Millisecond,
		Jitter:   -1,
		Sweep:    pgstore.SweepOptions{BatchSize: 500},
		Reap:     pgstore.ReapOptions{BatchSize: 1000},
		Tracer:   idem.Tracers(tracer, other),
		Logger:   slog.New(slog.DiscardHandler),
	}
	runs := runJanitorFor(t, store, opts, 1)
	opts.Sweep.Fail = true
	runs = append(runs, runJanitorFor(t, store, opts, 3)...)

	want := []struct {
		sweep pgstore.SweepResult
		reap  pgstore.ReapResult
	}{
		{pgstore.SweepResult{Abandoned: nToFail}, pgstore.ReapResult{Deleted: nExpired - nDerived, Emptied: nDerived, Batches: batches(nExpired, 1000)}},
		{pgstore.SweepResult{Failed: nToFail, Batches: batches(nToFail, 500)}, pgstore.ReapResult{Deleted: nAbandonedExpired, Batches: 1}},
		{},
		{},
	}
	traced := tracer.seen()
	if len(traced) != len(runs) || len(other.seen()) != len(runs) {
		t.Fatalf("tracers saw %d and %d runs, want %d", len(traced), len(other.seen()), len(runs))
	}
	for i, r := range runs {
		if r.Sweep != want[i].sweep || r.Reap != want[i].reap || r.Err != nil {
			t.Errorf("run %d: sweep %+v, reap %+v, err %v; want %+v, %+v, nil", i, r.Sweep, r.Reap, r.Err, want[i].sweep, want[i].reap)
		}
		if r.Started.IsZero() || r.Took <= 0 || r.Delay != 0 || r.Pauses != 0 {
			t.Errorf("run %d: started %v, took %v, delay %v, pauses %v; want a start, a time and no jitter", i, r.Started, r.Took, r.Delay, r.Pauses)
		}
		if i > 0 && !r.Started.After(runs[i-1].Started) {
			t.Errorf("run %d started at %v, not after run %d at %v", i, r.Started, i-1, runs[i-1].Started)
		}
		wantTrace := idem.TraceMaintenanceData{
			Abandoned: r.Sweep.Abandoned,
			Failed:    r.Sweep.Failed,
			Deleted:   r.Reap.Deleted,
			Emptied:   r.Reap.Emptied,
			Duration:  r.Took,
		}
		if traced[i] != wantTrace {
			t.Errorf("run %d traced as %+v, want %+v", i, traced[i], wantTrace)
		}
	}
	want0 := seeded()
	move(want0, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	delete(want0, "abandonedexpired/in_flight/0")
	delete(want0, "expired/completed/201")
	want0["expired/expired/0"] = nDerived
	checkTally(t, pool, want0)
}

// A statement waiting for a lock another transaction holds, such as a
// migration's, is stopped after StatementTimeout: the run reports the
// timeout, and once the lock is gone the next run does all the work. The
// server stopped the waiting statements too, or they would have done part
// of it when the lock went.
func TestJanitorStatementTimeout(t *testing.T) {
	t.Parallel() // its first run waits out its timeout twice
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
	if _, err := lock.Exec(ctx, `LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	// Sweep and Reap called directly are bounded the same way.
	var timedOut *pgstore.StatementTimeoutError
	quiet := slog.New(slog.DiscardHandler)
	if _, err := store.Sweep(ctx, pgstore.SweepOptions{StatementTimeout: 50 * time.Millisecond, Logger: quiet}); !errors.As(err, &timedOut) ||
		!strings.HasPrefix(err.Error(), "pgstore: sweep: count abandoned attempts: statement timed out after 50ms (StatementTimeout): ") {
		t.Errorf("report-only Sweep = %v, want a *StatementTimeoutError", err)
	}
	if _, err := store.Reap(ctx, pgstore.ReapOptions{DryRun: true, StatementTimeout: 50 * time.Millisecond, Logger: quiet}); !errors.As(err, &timedOut) {
		t.Errorf("dry-run Reap = %v, want a *StatementTimeoutError", err)
	}

	// Long enough that the run after the lock, whose statements do real
	// work, never meets it, even on a loaded machine; the first run,
	// behind the lock, waits it out.
	const timeout = time.Second
	log := &logs{}
	tracer := &maintenance{}
	var unlock sync.Once
	runs := runJanitorFor(t, store, pgstore.JanitorOptions{
		Interval:         time.Millisecond,
		Jitter:           -1,
		StatementTimeout: timeout,
		Sweep:            pgstore.SweepOptions{Fail: true},
		Tracer:           tracer,
		Logger:           log.logger(),
		OnRun: func(r pgstore.JanitorRun) {
			if r.Err != nil {
				// Let the next run through.
				unlock.Do(func() {
					if err := lock.Rollback(ctx); err != nil {
						t.Error(err)
					}
				})
			}
		},
	}, 2)

	failed := runs[0]
	if !errors.As(failed.Err, &timedOut) || timedOut.Timeout != timeout {
		t.Fatalf("first run's error = %v, want a *StatementTimeoutError of %v", failed.Err, timeout)
	}
	var pgErr *pgconn.PgError
	if !errors.As(timedOut, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("timeout error wraps %v, want the server's cancellation (57014)", timedOut.Err)
	}
	// The reap runs after a failed sweep, and times out as well.
	for _, w := range []string{
		"pgstore: sweep: fail abandoned attempts: statement timed out after 1s (StatementTimeout): ",
		"pgstore: reap: delete expired keys: statement timed out after 1s (StatementTimeout): ",
	} {
		if !strings.Contains(failed.Err.Error(), w) {
			t.Errorf("first run's error %q does not say %q", failed.Err, w)
		}
	}
	if failed.Sweep != (pgstore.SweepResult{}) || failed.Reap != (pgstore.ReapResult{}) || failed.Took < 2*timeout {
		t.Errorf("first run: sweep %+v, reap %+v, took %v; want nothing done, in at least %v", failed.Sweep, failed.Reap, failed.Took, 2*timeout)
	}
	for _, msg := range []string{"idem: janitor: sweep failed; retrying at the next run", "idem: janitor: reap failed; retrying at the next run"} {
		if recs := log.with(msg); len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0].attrs["error"]), "StatementTimeout") {
			t.Errorf("%q logged as %+v, want once, naming StatementTimeout", msg, recs)
		}
	}

	next := runs[1]
	wantSweep := pgstore.SweepResult{Failed: nToFail, Batches: batches(nToFail, 500)}
	wantReap := pgstore.ReapResult{Deleted: nExpired + nAbandonedExpired, Batches: batches(nExpired+nAbandonedExpired, 1000)}
	if next.Err != nil || next.Sweep != wantSweep || next.Reap != wantReap {
		t.Errorf("run after the lock: sweep %+v, reap %+v, err %v; want %+v, %+v, nil", next.Sweep, next.Reap, next.Err, wantSweep, wantReap)
	}
	if traced := tracer.seen(); len(traced) != 2 || traced[0].Err != failed.Err || traced[1].Err != nil || traced[1].Failed != nToFail {
		t.Errorf("tracer saw %+v", traced)
	}
	want := seeded()
	move(want, "abandoned/in_flight/0", "abandoned/completed/500", -1)
	delete(want, "abandonedexpired/in_flight/0")
	delete(want, "expired/completed/201")
	checkTally(t, pool, want)
}

// Each run waits a random delay under Jitter before it begins, and pauses
// under Jitter/10 between batches; with Jitter zero, the delay is under a
// tenth of Interval. The bounds are checked on the delays the janitor
// reports, and that it waited them on the times it reports.
func TestJanitorJitter(t *testing.T) {
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	seed(t, pool)
	quiet := slog.New(slog.DiscardHandler)

	const jitter = 20 * time.Millisecond
	runs := runJanitorFor(t, store, pgstore.JanitorOptions{
		Interval: jitter,
		Jitter:   jitter,
		Sweep:    pgstore.SweepOptions{Fail: true, BatchSize: 500},
		Reap:     pgstore.ReapOptions{BatchSize: 1000},
		Logger:   quiet,
	}, 5)
	delays := map[time.Duration]bool{}
	for i, r := range runs {
		if r.Err != nil {
			t.Errorf("run %d: %v", i, r.Err)
		}
		if r.Delay < 0 || r.Delay >= jitter {
			t.Errorf("run %d: delay %v, want in [0, %v)", i, r.Delay, jitter)
		}
		delays[r.Delay] = true
		if r.Took < r.Pauses {
			t.Errorf("run %d took %v, less than its pauses %v", i, r.Took, r.Pauses)
		}
		if i > 0 {
			if ended := runs[i-1].Started.Add(runs[i-1].Took); r.Started.Sub(ended) < r.Delay {
				t.Errorf("run %d began %v after run %d ended, before its delay %v", i, r.Started.Sub(ended), i-1, r.Delay)
			}
		}
	}
	if len(delays) == 1 {
		t.Errorf("every run waited %v; want random delays", runs[0].Delay)
	}
	// The first run sweeps in 5 batches and reaps in 3: 6 pauses between
	// batches. Later runs have one batch each, and no pause.
	if first := runs[0]; first.Sweep.Batches != 5 || first.Reap.Batches != 3 || first.Pauses <= 0 || first.Pauses >= 6*jitter/10 {
		t.Errorf("first run: %d+%d batches, pauses %v; want 5+3, pauses in (0, %v)", first.Sweep.Batches, first.Reap.Batches, first.Pauses, 6*jitter/10)
	}
	for i, r := range runs[1:] {
		if r.Pauses != 0 {
			t.Errorf("run %d: pauses %v with one batch", i+1, r.Pauses)
		}
	}

	const interval = 20 * time.Millisecond
	for i, r := range runJanitorFor(t, store, pgstore.JanitorOptions{Interval: interval, Logger: quiet}, 3) {
		if r.Delay < 0 || r.Delay >= interval/10 {
			t.Errorf("default jitter, run %d: delay %v, want in [0, %v)", i, r.Delay, interval/10)
		}
	}
}

// A janitor waiting out its jitter stops at once when its context ends,
// reporting no run: none began. The bubble's clock shows that no time
// passed.
func TestJanitorJitterEndsWithContext(t *testing.T) {
	store := pgstore.New(newPool(t, nil), pgstore.Options{})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runs := 0
		j := pgstore.NewJanitor(store, pgstore.JanitorOptions{
			Interval: 2 * time.Hour,
			Jitter:   time.Hour,
			OnRun:    func(pgstore.JanitorRun) { runs++ },
			Logger:   slog.New(slog.DiscardHandler),
		})
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- j.Run(ctx) }()
		synctest.Wait() // Run is waiting before its first run.
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if waited := time.Since(start); waited != 0 || runs != 0 {
			t.Errorf("Run returned after %v with %d runs; want at once, with none", waited, runs)
		}
	})
}

// Emptied rows do not stay for ever: Reap deletes a row emptied once its
// TTL ended longer than EmptiedFor ago, keeps the others (and every row
// with a negative EmptiedFor), and finds them through the emptied rows'
// index rather than the whole table.
func TestEmptiedRowsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	pool := newPool(t, nil)
	store := pgstore.New(pool, pgstore.Options{})
	// Keys whose attempts derived keys, their TTL ended 100 days, 10 days
	// and a minute ago; and one that derived nothing.
	if _, err := pool.Exec(ctx, `
		INSERT INTO idempotency_keys (scope, operation, key, fingerprint, status, generation, derived, response_status, response_headers, response_body, expires_at)
		SELECT 's', 'createPayment', k, 'fp', 'completed', 3, d, 201, '{}', 'body', now() - age
		FROM (VALUES ('old', true, interval '100 days'), ('ten-days', true, interval '10 days'),
		             ('minute', true, interval '1 minute'), ('plain', false, interval '100 days')) AS v(k, d, age)`); err != nil {
		t.Fatal(err)
	}
	keys := func() map[string]string {
		rows, err := pool.Query(ctx, `SELECT key, status || '/' || generation FROM idempotency_keys ORDER BY key`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reap := func(opts pgstore.ReapOptions, want pgstore.ReapResult, left map[string]string) {
		t.Helper()
		opts.Logger = slog.New(slog.DiscardHandler)
		res, err := store.Reap(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		res.Batches = 0
		if res != want {
			t.Errorf("Reap(EmptiedFor %v) = %+v, want %+v", opts.EmptiedFor, res, want)
		}
		if got := keys(); !maps.Equal(got, left) {
			t.Errorf("after Reap(EmptiedFor %v) the table holds %v, want %v", opts.EmptiedFor, got, left)
		}
	}

	// The default keeps 90 days: the key that derived nothing is deleted,
	// the others emptied, and the one emptied 100 days after its TTL
	// deleted in the same run.
	reap(pgstore.ReapOptions{}, pgstore.ReapResult{Deleted: 1, Emptied: 3, DeletedEmptied: 1},
		map[string]string{"ten-days": "expired/3", "minute": "expired/3"})
	// Negative keeps every emptied row.
	reap(pgstore.ReapOptions{EmptiedFor: -1}, pgstore.ReapResult{},
		map[string]string{"ten-days": "expired/3", "minute": "expired/3"})
	// A dry run counts what a week's horizon would delete.
	reap(pgstore.ReapOptions{EmptiedFor: 7 * 24 * time.Hour, DryRun: true}, pgstore.ReapResult{DeletedEmptied: 1},
		map[string]string{"ten-days": "expired/3", "minute": "expired/3"})
	reap(pgstore.ReapOptions{EmptiedFor: 7 * 24 * time.Hour}, pgstore.ReapResult{DeletedEmptied: 1},
		map[string]string{"minute": "expired/3"})

	// The deleted key's next use is its first again.
	rec, err := store.Lookup(ctx, idem.ID{Scope: "s", Operation: "createPayment", Key: "old"})
	if err != nil || rec.Found {
		t.Errorf("Lookup of the deleted key = %+v, %v; want no row", rec, err)
	}

	// The delete reads the emptied rows' index: with sequential scans
	// off, the plan of the store's own statement uses it.
	plan := explainQuery(ctx, t, pool, "DeleteEmptied", int64(1000), int32(1000))
	if !strings.Contains(plan, "idempotency_keys_emptied_idx") {
		t.Errorf("DeleteEmptied does not use idempotency_keys_emptied_idx:\n%s", plan)
	}
}

// explainQuery returns the plan of the store's query name (queries/*.sql)
// with args, sequential scans off, without running it.
func explainQuery(ctx context.Context, t *testing.T, pool *pgxpool.Pool, name string, args ...any) string {
	t.Helper()
	src, err := fs.ReadFile(queries.FS, "idempotency_keys.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "-- name: "+name+" ")
	if !ok {
		t.Fatalf("no query %s", name)
	}
	sql, _, _ := strings.Cut(rest, "-- name: ")
	_, sql, _ = strings.Cut(sql, "\n")
	n := 0
	sql = regexp.MustCompile(`sqlc\.n?arg\([a-z_]+\)`).ReplaceAllStringFunc(sql, func(string) string { n++; return fmt.Sprintf("$%d", n) })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+strings.TrimSuffix(strings.TrimSpace(sql), ";"), args...)
	if err != nil {
		t.Fatalf("explain %s: %v", name, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v", name, err)
	}
	return strings.Join(lines, "\n")
}
