package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// Main runs the tests and stops a PostgreSQL cluster started for them. A
// package that calls NewDatabase or NewPool needs
//
//	func TestMain(m *testing.M) { idemtest.Main(m) }
func Main(m *testing.M) { pgtest.Main(m) }

// NewDatabase returns the URL of a new, empty database, dropped when the
// test ends. Its server is DATABASE_URL's when that is set, else the one on
// 127.0.0.1:5432, else a throwaway cluster started with initdb and pg_ctl
// and stopped by Main.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabase(t)
}

// NewPool returns a pool on a new database (see NewDatabase) with the key
// store migrated and then schema, the application's own SQL, applied. It
// is closed, and the database dropped, when the test ends.
func NewPool(t testing.TB, schema ...string) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	if err := pgstore.Migrate(t.Context(), pool, schema...); err != nil {
		t.Fatalf("idemtest: migrate: %v", err)
	}
	return pool
}

// Request is one valid request to an idempotent operation: one that its
// handler answers with a 2xx.
type Request struct {
	Method string // POST
	Path   string // /orders, with any query
	// Header holds Content-Type and what else the operation needs, such as
	// a tenant header; the checks set Idempotency-Key, or the header Key
	// names.
	Header http.Header
	Body   []byte
	// Key is where the operation reads its idempotency key from when that
	// is not the Idempotency-Key header, one part each (a composite key
	// has several): each check puts fresh values there, in their header,
	// in Path's query, or in Body at their member or form field,
	// replacing what the request has there. The generated helpers set it
	// from the spec. Nil: the checks send the Idempotency-Key header.
	Key []KeyPart
	// Changed is another valid body for the same operation, for the check
	// that a key reused for a different request is a 422; the check puts
	// the key's parts in it as in Body. Nil: the checks derive one from a
	// JSON or form body by changing one of its values, not the key's.
	Changed []byte
	// OutsideAttempt names tables ("audit_log", or "schema.audit_log")
	// the operation writes outside its attempt's transaction on purpose,
	// because their rows must outlive a failed attempt: the error check
	// does not count their changes as a mistake (see Hooks.Tables).
	OutsideAttempt []string
}

// Hooks let the checks count the operation's runs, make one fail and see
// what the failed run left in the database. The generated conformance
// helpers (tests: true) supply all three by wrapping the implementation;
// a hand-written test can too. Without Runs the checks count nothing;
// without FailNext the error check does not run; without Tables it does
// not look for writes outside the attempt. Each says so in the test log.
type Hooks struct {
	// Runs reports how many times the operation's method has run.
	Runs func() int
	// FailNext makes the next run return an error after the method ran,
	// so that its writes roll back.
	FailNext func()
	// Tables reads the application's tables as committed: ReadTables on
	// the application's pool, or AttemptDB.Tables. The error check reads
	// them before and after the run it makes fail. A table the failed run
	// changed was written outside the attempt's transaction (through the
	// pool, not at.Tx()): those rows survive the failure and the retry
	// writes them again, so the check fails, naming the table, unless
	// Request.OutsideAttempt lists it. A nil *Tables and nil error mean
	// there is no database to read, as on the in-memory store.
	Tables func(ctx context.Context) (*Tables, error)
	// Problems is the error shape the handler answers in (the handler
	// options' Problems); nil is problem+json. The checks read the
	// problem's type back through it when it has a ProblemType method, as
	// *idem.ErrorShape has.
	Problems idem.ProblemShape
}

// TB is what Check needs of a test: a testing.TB whose Run runs a subtest
// on a value of its own type. *testing.T is one; so is a fake that
// records failures instead of reporting them, for testing a check itself
// (see Recorder).
type TB[T any] interface {
	testing.TB
	Run(name string, f func(t T)) bool
}

// Concurrency is how many identical requests the concurrent check sends
// at once.
const Concurrency = 20

// Check drives one operation of h through the Idempotency-Key protocol
// over real HTTP, each check in a subtest with keys of its own, sent in
// the Idempotency-Key header or where Request.Key says:
//
//   - first: the request is answered with a 2xx, not replayed, and runs once;
//   - replay: the same request and key again is the same answer, byte for
//     byte, marked Idempotent-Replayed, and does not run;
//   - changed-request: the key with another request is a 422;
//   - concurrent: Concurrency identical requests at once run once, and
//     each is answered with that answer or a 409;
//   - error-releases-key: a run that fails is a 500 that changed no table
//     (Hooks.Tables) and leaves the key free, so that the retry runs and
//     its answer is kept.
func Check[T TB[T]](t T, h http.Handler, req Request, hooks Hooks) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := &client{url: srv.URL, req: req, http: &http.Client{Timeout: time.Minute}, problems: hooks.Problems}
	runs := hooks.Runs
	if runs == nil {
		t.Log("idemtest: no Hooks.Runs: the checks cannot count the operation's runs")
		runs = func() int { return unknownRuns }
	}

	key := req.newKey()
	var first exchange
	if !t.Run("first", func(t T) {
		var err error
		if first, err = checkFirst(t.Context(), c, key, runs); err != nil {
			t.Fatal(err)
		}
	}) {
		return // the others need a first answer
	}
	t.Run("replay", func(t T) {
		if err := checkReplay(t.Context(), c, key, first, runs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("changed-request", func(t T) {
		changed, err := req.changed()
		if err != nil {
			t.Logf("idemtest: not checked: %v; set Request.Changed", err)
			return
		}
		if err := checkChanged(t.Context(), c, key, changed, runs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("concurrent", func(t T) {
		if err := checkConcurrent(t.Context(), c, req.newKey(), Concurrency, runs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("error-releases-key", func(t T) {
		if hooks.FailNext == nil {
			t.Log("idemtest: not checked: no Hooks.FailNext to make a run fail")
			return
		}
		tables := hooks.Tables
		if tables == nil {
			t.Log("idemtest: writes outside the attempt not looked for: no Hooks.Tables to read the database")
			tables = func(context.Context) (*Tables, error) { return nil, nil }
		}
		if err := checkErrorReleasesKey(t.Context(), c, req.newKey(), hooks.FailNext, runs, tables); err != nil {
			t.Fatal(err)
		}
	})
}

// tableNames is "table a", or "tables a and b", of the changes listed.
func tableNames(changed []string) string {
	names := make([]string, len(changed))
	for i, c := range changed {
		names[i], _, _ = strings.Cut(c, " (")
	}
	if len(names) == 1 {
		return "table " + names[0]
	}
	return "tables " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// NewKey returns a random Idempotency-Key, or value of a key part that
// is text.
func NewKey() string {
	return "idemtest-" + rand.Text()
}

const unknownRuns = -1

// client sends the operation's request with a given key and body.
type client struct {
	url  string
	req  Request
	http *http.Client
	// problems is the handler's error shape.
	problems idem.ProblemShape
}

// exchange is an answer as the checks compare it.
type exchange struct {
	sent     []byte // the request's body, with its key
	status   int
	header   http.Header
	body     []byte
	problems idem.ProblemShape
}

func (e exchange) String() string {
	return fmt.Sprintf("%d %s", e.status, bytes.TrimSpace(e.body))
}

func (e exchange) replayed() bool { return e.header.Get(idem.HeaderReplayed) == "true" }

func (e exchange) ok() bool { return e.status >= 200 && e.status < 300 }

// problem reports the answer's problem type, "" when it is not a problem.
func (e exchange) problem() string {
	if typer, ok := e.problems.(interface {
		ProblemType(h http.Header, body []byte) string
	}); ok {
		return typer.ProblemType(e.header, e.body)
	}
	var p idem.Problem
	if e.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(e.body, &p) != nil {
		return ""
	}
	return p.Type
}

func (c *client) send(ctx context.Context, key keyValues, body []byte) (exchange, error) {
	if body == nil {
		body = c.req.Body
	}
	r, sent, err := c.request(ctx, key, body)
	if err != nil {
		return exchange{}, err
	}
	resp, err := c.http.Do(r)
	if err != nil {
		return exchange{}, fmt.Errorf("idemtest: %s %s: %w", c.req.Method, c.req.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return exchange{}, fmt.Errorf("idemtest: %s %s: reading the answer: %w", c.req.Method, c.req.Path, err)
	}
	return exchange{sent: sent, status: resp.StatusCode, header: resp.Header, body: b, problems: c.problems}, nil
}

// ranSince reports an error when the operation did not run want times
// since before, if runs are counted.
func ranSince(runs func() int, before, want int, what string) error {
	if before == unknownRuns {
		return nil
	}
	if got := runs() - before; got != want {
		return fmt.Errorf("%s: the operation ran %d times, want %d", what, got, want)
	}
	return nil
}

func checkFirst(ctx context.Context, c *client, key keyValues, runs func() int) (exchange, error) {
	before := runs()
	first, err := c.send(ctx, key, nil)
	if err != nil {
		return first, err
	}
	if !first.ok() {
		return first, fmt.Errorf("first call (%s): answered %v, want a 2xx: is the request valid?", c.req.describe(key), first)
	}
	if first.replayed() {
		return first, fmt.Errorf("first call with a new key: marked %s: true", idem.HeaderReplayed)
	}
	return first, ranSince(runs, before, 1, "first call")
}

func checkReplay(ctx context.Context, c *client, key keyValues, first exchange, runs func() int) error {
	before := runs()
	again, err := c.send(ctx, key, nil)
	if err != nil {
		return err
	}
	if again.status != first.status || !bytes.Equal(again.body, first.body) {
		return fmt.Errorf("the same request and key again: answered %v, want the first answer byte for byte: %v", again, first)
	}
	if !again.replayed() {
		return fmt.Errorf("the same request and key again: no %s: true header", idem.HeaderReplayed)
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if again.header.Get(h) != first.header.Get(h) {
			return fmt.Errorf("the same request and key again: %s %q, want the first answer's %q", h, again.header.Get(h), first.header.Get(h))
		}
	}
	return ranSince(runs, before, 0, "a replay")
}

func checkChanged(ctx context.Context, c *client, key keyValues, changed []byte, runs func() int) error {
	before := runs()
	got, err := c.send(ctx, key, changed)
	if err != nil {
		return err
	}
	if got.status != http.StatusUnprocessableEntity || got.problem() != idem.TypeKeyReused {
		return fmt.Errorf("the key with another request (%s): answered %v, want 422 %s", got.sent, got, idem.TypeKeyReused)
	}
	return ranSince(runs, before, 0, "the key with another request")
}

func checkConcurrent(ctx context.Context, c *client, key keyValues, n int, runs func() int) error {
	before := runs()
	answers := make([]exchange, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = c.send(ctx, key, nil)
		})
	}
	close(start)
	wg.Wait()
	var kept *exchange
	fresh := 0
	for i, a := range answers {
		if errs[i] != nil {
			return errs[i]
		}
		switch {
		case a.ok():
			if kept != nil && (a.status != kept.status || !bytes.Equal(a.body, kept.body)) {
				return fmt.Errorf("%d requests at once with one key: two different answers: %v and %v", n, kept, a)
			}
			kept = &answers[i]
			if !a.replayed() {
				fresh++
			}
		case a.status == http.StatusConflict && a.problem() == idem.TypeKeyInUse:
		default:
			return fmt.Errorf("%d requests at once with one key: answered %v, want the 2xx or 409 %s", n, a, idem.TypeKeyInUse)
		}
	}
	if fresh != 1 {
		// The request that ran gets its answer fresh; all others replay it
		// or wait with a 409.
		return fmt.Errorf("%d requests at once with one key: %d answers not marked replayed, want 1", n, fresh)
	}
	if err := ranSince(runs, before, 1, fmt.Sprintf("%d requests at once with one key", n)); err != nil {
		return err
	}
	after, err := c.send(ctx, key, nil)
	if err != nil {
		return err
	}
	if !after.ok() || !after.replayed() || (kept != nil && !bytes.Equal(after.body, kept.body)) {
		return fmt.Errorf("after %d requests at once: the next answered %v, want the kept 2xx replayed", n, after)
	}
	return nil
}

func checkErrorReleasesKey(ctx context.Context, c *client, key keyValues, failNext func(), runs func() int, tables func(context.Context) (*Tables, error)) error {
	tablesBefore, err := tables(ctx)
	if err != nil {
		return err
	}
	before := runs()
	failNext()
	failed, err := c.send(ctx, key, nil)
	if err != nil {
		return err
	}
	if failed.status != http.StatusInternalServerError || failed.problem() != idem.TypeInternal {
		return fmt.Errorf("a run that fails: answered %v, want 500 %s", failed, idem.TypeInternal)
	}
	if tablesBefore != nil {
		tablesAfter, err := tables(ctx)
		if err != nil {
			return err
		}
		if changed := tablesBefore.changed(tablesAfter, c.req.OutsideAttempt); len(changed) > 0 {
			return fmt.Errorf("a run that fails: the handler wrote to %s outside its attempt's transaction (at.Tx()); "+
				"those writes survive a failed attempt and a retry repeats them: %s. "+
				"Write through at.Tx(), or list a table whose rows must outlive a failed attempt in Request.OutsideAttempt",
				tableNames(changed), strings.Join(changed, "; "))
		}
	}
	if err := ranSince(runs, before, 1, "a run that fails"); err != nil {
		return err
	}
	retry, err := c.send(ctx, key, nil)
	if err != nil {
		return err
	}
	if !retry.ok() || retry.replayed() {
		return fmt.Errorf("the retry after a failed run: answered %v (replayed: %v), want a fresh 2xx: the failure must leave the key free", retry, retry.replayed())
	}
	if err := ranSince(runs, before, 2, "the retry after a failed run"); err != nil {
		return err
	}
	again, err := c.send(ctx, key, nil)
	if err != nil {
		return err
	}
	if !again.replayed() || !bytes.Equal(again.body, retry.body) {
		return fmt.Errorf("after the retry: answered %v, want the retry's answer replayed", again)
	}
	return nil
}
