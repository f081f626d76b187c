package idemriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(workerEnv); url != "" {
		// This process is the worker TestAsyncWorkerKilled kills.
		killableWorker(url)
		return
	}
	pgtest.Main(m)
}

// exportJob is the job type of the test's async operation, as the
// generated code declares one per operation.
type exportJob struct{ idemriver.Args }

func (exportJob) Kind() string { return "idem.createExport" }

func newExportJob(a idem.Accepted) exportJob { return exportJob{idemriver.ArgsOf(a)} }

// exportRequest is the typed request the handler gets back on its worker.
type exportRequest struct {
	Account string `json:"account"`
}

// newPool returns a pool on a database with the key store's and River's
// migrations applied, and a table the handlers write their effects to.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgtest.NewMigratedDatabase(t, "key store and river", func(ctx context.Context, url string) error {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return err
		}
		defer pool.Close()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		err = pgstore.Migrate(ctx, conn.Conn())
		conn.Release()
		if err != nil {
			return err
		}
		if err := idemriver.Migrate(ctx, pool); err != nil {
			return err
		}
		_, err = pool.Exec(ctx, `CREATE TABLE effects (key text NOT NULL, account text NOT NULL)`)
		return err
	})
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// harness is one service's side of the test: an engine on the store,
// the async operation, and what its handler does.
type harness struct {
	t      *testing.T
	pool   *pgxpool.Pool
	engine *idem.Engine[pgx.Tx]
	op     *idem.Operation
	insert *river.Client[pgx.Tx]
	// handle is the handler: the generated worker calls the user's
	// method with the decoded request.
	handle func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error)
}

func newHarness(t *testing.T, pool *pgxpool.Pool, opts idem.Options) *harness {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	insert, err := idemriver.NewInsertClient()
	if err != nil {
		t.Fatal(err)
	}
	return &harness{
		t:      t,
		pool:   pool,
		engine: idem.NewEngine[pgx.Tx](pgstore.New(pool, pgstore.Options{}), opts),
		op:     &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: 5 * time.Second, Async: true, Path: "/exports", StatusPath: "/exports/requests/{key}"},
		insert: insert,
		handle: func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
			if _, err := at.Tx().Exec(ctx, `INSERT INTO effects (key, account) VALUES ($1, $2)`, at.Key(), req.Account); err != nil {
				return nil, err
			}
			return created(`{"account":"` + req.Account + `"}`), nil
		},
	}
}

func (h *harness) phases(_ context.Context, raw []byte) (idem.PhaseFunc[pgx.Tx], error) {
	var req exportRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, err
	}
	return func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
		w, err := h.handle(ctx, at, req)
		return "", w, err
	}, nil
}

// worker returns a started River client running the operation's worker
// with maxWorkers at once; it stops when the test ends.
func (h *harness) worker(maxWorkers int) *river.Client[pgx.Tx] {
	h.t.Helper()
	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.NewWorker[pgx.Tx, exportJob](h.engine, h.op, h.phases, slog.New(slog.DiscardHandler)))
	client, err := river.NewClient(riverpgxv5.New(h.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		RetryPolicy:       retryAtOnce{},
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			h.t.Errorf("stop River client: %v", err)
		}
	})
	return client
}

// retryAtOnce retries a failed job at once, so that tests of retries do
// not wait out River's backoff.
type retryAtOnce struct{}

func (retryAtOnce) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

// post sends a request of the operation with key (and tenant, for a
// scope), as the generated handler would.
func (h *harness) post(key, tenant, account string) *idem.Response {
	h.t.Helper()
	r := httptest.NewRequest("POST", "/v1/exports", nil)
	r.Header.Set(idem.HeaderKey, key)
	if tenant != "" {
		r.Header.Set("X-Tenant", tenant)
	}
	req := exportRequest{Account: account}
	resp, err := h.engine.ServeAsync(idem.WithRequest(context.Background(), r), h.op, []byte(account), req,
		idemriver.Enqueue[pgx.Tx](h.insert, newExportJob))
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// status reads the status resource of key.
func (h *harness) status(key, tenant string) (*idem.Response, idem.AsyncStatus) {
	h.t.Helper()
	r := httptest.NewRequest("GET", "/v1"+h.op.StatusLocation(key), nil)
	if tenant != "" {
		r.Header.Set("X-Tenant", tenant)
	}
	resp, err := h.engine.Status(idem.WithRequest(context.Background(), r), h.op, key)
	if err != nil {
		h.t.Fatal(err)
	}
	var st idem.AsyncStatus
	if resp.Status == http.StatusOK {
		if err := json.Unmarshal(resp.Body, &st); err != nil {
			h.t.Fatalf("status body %s: %v", resp.Body, err)
		}
	}
	return resp, st
}

// effects counts the handler's committed effects for key.
func (h *harness) effects(key string) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE key = $1`, key).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func created(body string) idem.Writer {
	return func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, err := w.Write([]byte(body))
		return err
	}
}

// finished returns a channel that gets each job that ended (completed,
// cancelled or discarded) on client.
func finished(t *testing.T, client *river.Client[pgx.Tx]) <-chan *river.Event {
	t.Helper()
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobCancelled, river.EventKindJobFailed)
	t.Cleanup(cancel)
	return events
}

// await waits for n jobs to end for good on events, bounding a hang.
func await(t *testing.T, events <-chan *river.Event, n int) []*river.Event {
	t.Helper()
	return awaitWithin(t, events, n, time.Minute)
}

// awaitWithin is await with a bound of d.
func awaitWithin(t *testing.T, events <-chan *river.Event, n int, d time.Duration) []*river.Event {
	t.Helper()
	var got []*river.Event
	deadline := time.After(d)
	for len(got) < n {
		select {
		case ev := <-events:
			if ev.Kind == river.EventKindJobFailed && ev.Job.State != rivertype.JobStateDiscarded {
				continue // retried
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("%d of %d jobs ended within %v", len(got), n, d)
		}
	}
	return got
}

// A first request is answered 202 with its status resource's Location
// and Retry-After as soon as it is claimed and its job enqueued, before
// its handler runs; once the worker ran it, its status holds the stored
// response, and a retry replays it.
func TestAsyncAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newPool(t), idem.Options{})
	release := make(chan struct{})
	var ran atomic.Int64
	inner := h.handle
	h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
		<-release
		ran.Add(1)
		return inner(ctx, at, req)
	}
	client := h.worker(2)
	events := finished(t, client)

	resp := h.post("exp-1", "", "acct_1")
	if resp.Status != http.StatusAccepted {
		t.Fatalf("first request: %d %s, want 202", resp.Status, resp.Body)
	}
	// The routes are mounted under /v1: the Location is too.
	if got := resp.Header.Get("Location"); got != "/v1/exports/requests/exp-1" {
		t.Errorf("Location = %q, want the status resource under the routes' prefix, /v1/exports/requests/exp-1", got)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the 202")
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler finished %d times before the 202", n)
	}
	if _, st := h.status("exp-1", ""); st.Status != idem.AsyncPending && st.Status != idem.AsyncRunning {
		t.Errorf("status while the handler waits: %q, want pending or running", st.Status)
	}
	close(release)
	await(t, events, 1)

	if n := h.effects("exp-1"); n != 1 {
		t.Fatalf("the handler committed %d effects, want 1", n)
	}
	resp, st := h.status("exp-1", "")
	if resp.Status != http.StatusOK || st.Status != idem.AsyncSucceeded || st.Response == nil || st.Response.Status != http.StatusCreated {
		t.Fatalf("status once done: %d %s", resp.Status, resp.Body)
	}
	if string(st.Response.Body) != `{"account":"acct_1"}` {
		t.Errorf("status holds body %s, want the handler's", st.Response.Body)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Error("a finished request's status still says Retry-After")
	}
	replay := h.post("exp-1", "", "acct_1")
	if replay.Status != http.StatusCreated || !replay.Replayed || string(replay.Body) != `{"account":"acct_1"}` {
		t.Errorf("retry once done: %d replayed=%v %s, want the stored 201", replay.Status, replay.Replayed, replay.Body)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// A retry of a request that is still running gets 202 with the same
// Location, not 409: the client is doing the right thing. Another
// request under the key gets 422 all the same.
func TestAsyncRetryWhileRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newPool(t), idem.Options{})
	// A lease no stall of a loaded machine outlasts: the worker holds it
	// while the retries below are answered.
	h.op.Lease = time.Minute
	started, release := make(chan struct{}), make(chan struct{})
	inner := h.handle
	h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
		close(started)
		<-release
		return inner(ctx, at, req)
	}
	client := h.worker(1)
	events := finished(t, client)

	first := h.post("exp-2", "", "acct_2")
	if first.Status != http.StatusAccepted {
		t.Fatalf("first request: %d %s", first.Status, first.Body)
	}
	<-started
	retry := h.post("exp-2", "", "acct_2")
	if retry.Status != http.StatusAccepted {
		t.Fatalf("retry while running: %d %s, want 202", retry.Status, retry.Body)
	}
	if retry.Header.Get("Location") != first.Header.Get("Location") || retry.Header.Get("Retry-After") == "" {
		t.Errorf("retry's Location %q and Retry-After %q; want %q and a delay", retry.Header.Get("Location"), retry.Header.Get("Retry-After"), first.Header.Get("Location"))
	}
	var st idem.AsyncStatus
	if err := json.Unmarshal(retry.Body, &st); err != nil || st.Status != idem.AsyncRunning {
		t.Errorf("retry's body %s: want status running", retry.Body)
	}
	if other := h.post("exp-2", "", "acct_other"); other.Status != http.StatusUnprocessableEntity {
		t.Errorf("another request under the running key: %d, want 422", other.Status)
	}
	close(release)
	await(t, events, 1)
	if n := h.effects("exp-2"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// The status resource is scoped like the key: another tenant cannot read
// a tenant's request, even knowing its key.
func TestAsyncStatusScoped(t *testing.T) {
	t.Parallel()
	scope := func(_ context.Context, r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
	h := newHarness(t, newPool(t), idem.Options{Scope: scope})
	client := h.worker(2)
	events := finished(t, client)

	if resp := h.post("exp-3", "tenant-a", "acct_a"); resp.Status != http.StatusAccepted {
		t.Fatalf("tenant a's request: %d %s", resp.Status, resp.Body)
	}
	await(t, events, 1)
	if resp, st := h.status("exp-3", "tenant-a"); resp.Status != http.StatusOK || st.Status != idem.AsyncSucceeded {
		t.Fatalf("tenant a's status: %d %s", resp.Status, resp.Body)
	}
	resp, _ := h.status("exp-3", "tenant-b")
	if resp.Status != http.StatusNotFound || strings.Contains(string(resp.Body), "acct_a") {
		t.Errorf("tenant b reading tenant a's key: %d %s, want 404 without its response", resp.Status, resp.Body)
	}
	// The same key from tenant b is a request of its own.
	if resp := h.post("exp-3", "tenant-b", "acct_b"); resp.Status != http.StatusAccepted {
		t.Errorf("tenant b's own request under the same key: %d %s, want 202", resp.Status, resp.Body)
	}
	await(t, events, 1)
	if n := h.effects("exp-3"); n != 2 {
		t.Errorf("%d effects for the key across two tenants, want 2", n)
	}
}

// A request whose every attempt fails ends in a stored failure: its
// status says failed with the async-request-failed problem, and a retry
// of its key replays that problem rather than running it again.
func TestAsyncFailureStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newPool(t), idem.Options{})
	var attempts atomic.Int64
	h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
		attempts.Add(1)
		return nil, errors.New("the export's storage refused the file")
	}
	// River's MaxAttempts, as the client inserting the jobs sets it.
	insert, err := river.NewClient(riverpgxv5.New(nil), &river.Config{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	h.insert = insert
	client := h.worker(1)
	events := finished(t, client)

	if resp := h.post("exp-4", "", "acct_4"); resp.Status != http.StatusAccepted {
		t.Fatalf("first request: %d %s", resp.Status, resp.Body)
	}
	ended := await(t, events, 1)
	if ended[0].Job.State != rivertype.JobStateCancelled {
		t.Errorf("the job ended %s, want cancelled once its failure is stored", ended[0].Job.State)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want River's 3 attempts", n)
	}
	resp, st := h.status("exp-4", "")
	if resp.Status != http.StatusOK || st.Status != idem.AsyncFailed || st.Response == nil || st.Response.Status != http.StatusInternalServerError ||
		!strings.Contains(string(st.Response.Body), "async-request-failed") {
		t.Fatalf("status after the last attempt: %d %s", resp.Status, resp.Body)
	}
	if strings.Contains(string(st.Response.Body), "refused the file") {
		t.Errorf("the stored failure holds the handler's error text: %s", st.Response.Body)
	}
	retry := h.post("exp-4", "", "acct_4")
	if retry.Status != http.StatusInternalServerError || !retry.Replayed {
		t.Errorf("retry after the failure: %d replayed=%v, want the stored 500", retry.Status, retry.Replayed)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("the retry ran the handler again (%d runs)", n)
	}
}

// Each request runs once however many workers, River clients and job
// runs meet it: several clients share the queue, some first runs fail
// and are retried, and every job is also worked a second time at once by
// another worker of the same job (as a rescued job would be): one effect
// per key.
func TestAsyncRunsOnceAcrossWorkers(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	const keys = 24
	var mu sync.Mutex
	failedOnce := map[string]bool{}
	var runs atomic.Int64
	var clients []*river.Client[pgx.Tx]
	var hs []*harness
	for range 3 {
		h := newHarness(t, pool, idem.Options{})
		// Short, so that a job snoozed behind another worker's lease
		// comes back soon.
		h.op.Lease = 2 * time.Second
		inner := h.handle
		h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
			runs.Add(1)
			mu.Lock()
			fail := !failedOnce[at.Key()] && strings.HasSuffix(at.Key(), "3")
			failedOnce[at.Key()] = true
			mu.Unlock()
			if fail {
				return nil, errors.New("a first run that fails")
			}
			return inner(ctx, at, req)
		}
		hs = append(hs, h)
		clients = append(clients, h.worker(4))
	}
	events := finished(t, clients[0])
	var others []<-chan *river.Event
	for _, c := range clients[1:] {
		others = append(others, finished(t, c))
	}
	// Every job, worked a second time by another service's worker while
	// the River clients work it.
	second := idemriver.NewWorker[pgx.Tx, exportJob](hs[1].engine, hs[1].op, hs[1].phases, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	for i := range keys {
		key := fmt.Sprintf("exp-many-%d", i)
		if resp := hs[i%3].post(key, "", "acct"); resp.Status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", key, resp.Status, resp.Body)
		}
		wg.Go(func() {
			job := &river.Job[exportJob]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 25}, Args: exportJob{idemriver.Args{Operation: "createExport", Key: key, Generation: 1}}}
			// It runs the request, finds it done, finds it held (and
			// would snooze), or fails as a first run may: never a second
			// effect.
			_ = second.Work(context.Background(), job)
		})
	}
	wg.Wait()
	// Every job ends once on one of the clients.
	total := 0
	deadline := time.After(time.Minute)
	for total < keys {
		select {
		case ev := <-events:
			total += countEnded(ev)
		case ev := <-others[0]:
			total += countEnded(ev)
		case ev := <-others[1]:
			total += countEnded(ev)
		case <-deadline:
			t.Fatalf("%d of %d jobs ended within a minute", total, keys)
		}
	}
	for i := range keys {
		key := fmt.Sprintf("exp-many-%d", i)
		if n := hs[0].effects(key); n != 1 {
			t.Errorf("%s: %d effects, want 1", key, n)
		}
		if resp, st := hs[0].status(key, ""); st.Status != idem.AsyncSucceeded {
			t.Errorf("%s: status %d %s", key, resp.Status, resp.Body)
		}
	}
	// Three keys (…3, …13, …23) fail their first run and run again.
	if n := runs.Load(); n < keys+3 {
		t.Errorf("the handler ran %d times for %d keys, 3 of which fail once", n, keys)
	}
}

func countEnded(ev *river.Event) int {
	if ev.Kind == river.EventKindJobFailed && ev.Job.State != rivertype.JobStateDiscarded {
		return 0
	}
	return 1
}

// Servers that start together on a new database all migrate River's
// tables without error, each migration applied once, and a pool of one
// connection migrates as well.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			cfg, err := pgxpool.ParseConfig(url)
			if err != nil {
				errs <- err
				return
			}
			cfg.MaxConns = int32(1 + i%2) // one connection, or two
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			errs <- idemriver.Migrate(context.Background(), pool)
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var versions, distinct int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version) FROM river_migration`).Scan(&versions, &distinct); err != nil {
		t.Fatal(err)
	}
	if versions == 0 || versions != distinct {
		t.Errorf("river_migration holds %d rows for %d versions, want each version once", versions, distinct)
	}
}

// traced records what the engine reports of requests and worker runs.
type traced struct {
	mu   sync.Mutex
	ends []idem.TraceRequestEndData
}

func (r *traced) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}

func (r *traced) TraceRequestEnd(_ context.Context, d idem.TraceRequestEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, d)
}

func (r *traced) outcomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.ends {
		who := "client"
		if d.Worker {
			who = "worker"
		}
		out = append(out, who+":"+d.Outcome.String())
	}
	return out
}

// A client's requests are traced as requests, accepted, in progress or
// read, and the worker's run as a run: Worker set, its outcome the
// stored response's.
func TestAsyncObserved(t *testing.T) {
	t.Parallel()
	rec := &traced{}
	h := newHarness(t, newPool(t), idem.Options{Tracer: rec})
	release := make(chan struct{})
	inner := h.handle
	h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
		<-release
		return inner(ctx, at, req)
	}
	client := h.worker(1)
	events := finished(t, client)
	h.post("exp-obs", "", "acct")
	h.post("exp-obs", "", "acct")
	h.status("exp-obs", "")
	close(release)
	await(t, events, 1)
	got := rec.outcomes()
	want := []string{"client:accepted", "client:in_progress", "client:status", "worker:first"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("traced %v, want %v", got, want)
	}
}

// FindJob names an accepted request's River job, for idemgen keys show,
// and finds none for a key of another use or on a database without
// River's tables.
func TestFindJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newPool(t), idem.Options{})
	if resp := h.post("exp-job", "", "acct"); resp.Status != http.StatusAccepted {
		t.Fatalf("accept: %d %s", resp.Status, resp.Body)
	}
	id := idem.ID{Operation: "createExport", Key: "exp-job"}
	job, ok, err := idemriver.FindJob(context.Background(), h.pool, id, 1)
	if err != nil || !ok || job.Kind != "idem.createExport" || job.State != "available" || job.ID == 0 {
		t.Fatalf("FindJob: %+v %v %v, want the available job of kind idem.createExport", job, ok, err)
	}
	if _, ok, err := idemriver.FindJob(context.Background(), h.pool, id, 2); ok || err != nil {
		t.Errorf("FindJob of the key's next use: %v %v, want none", ok, err)
	}
	conn, err := pgx.Connect(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, ok, err := idemriver.FindJob(context.Background(), conn, id, 1); ok || err != nil {
		t.Errorf("FindJob without River's tables: %v %v, want none and no error", ok, err)
	}
}

// workerEnv names the database of the worker process TestAsyncWorkerKilled
// starts and kills.
const workerEnv = "IDEMRIVER_TEST_KILLED_WORKER"

// killedQueue is the queue of the jobs the killed worker takes: the test's
// own River client works it only once that worker is dead.
const killedQueue = "killed"

// killedJob is exportJob on killedQueue.
type killedJob struct{ exportJob }

func (killedJob) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: killedQueue} }

// killableWorker runs a River client that works killedQueue with a
// handler of two phases: the first commits its effect and the recovery
// point "written"; the second writes its effect, says so with NOTIFY, and
// never returns: the test kills this process there, with that effect
// uncommitted.
func killableWorker(url string) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	engine := idem.NewEngine[pgx.Tx](pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler), StoreTimeout: 100 * time.Millisecond})
	op := killedOperation()
	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.NewWorker[pgx.Tx, killedJob](engine, op, func(context.Context, []byte) (idem.PhaseFunc[pgx.Tx], error) {
		return func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			if at.RecoveryPoint() == "" {
				_, err := at.Tx().Exec(ctx, `INSERT INTO effects (key, account) VALUES ($1, 'first phase')`, at.Key())
				return "written", nil, err
			}
			if _, err := at.Tx().Exec(ctx, `INSERT INTO effects (key, account) VALUES ($1, 'killed')`, at.Key()); err != nil {
				return "", nil, err
			}
			if _, err := pool.Exec(ctx, `SELECT pg_notify('killed_worker', $1)`, at.Key()); err != nil {
				return "", nil, err
			}
			select {} // until SIGKILL
		}, nil
	}, slog.New(slog.DiscardHandler)))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{killedQueue: {MaxWorkers: 1}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	select {}
}

func killedOperation() *idem.Operation {
	return &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: time.Minute, Async: true, Path: "/exports",
		StatusPath: "/exports/requests/{key}", RecoveryPoints: []string{"written"}}
}

// A worker killed with SIGKILL in the middle of its second phase, in a
// process of its own, leaves that phase's effect uncommitted, its job
// running in River's eyes and the key in flight. While the key's lease
// runs, the Rescuer leaves the job alone; once it has passed, the Rescuer
// inserts one job for the request (once, however often it runs), and a
// live worker takes the key over and resumes at the recovery point: the
// first phase's effect once, the second's once. River's own rescuer,
// which would retry the stuck job an hour later here, takes no part.
func TestAsyncWorkerKilled(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	url := pool.Config().ConnString()
	h := newHarness(t, pool, idem.Options{StoreTimeout: 100 * time.Millisecond})
	h.op = killedOperation()
	var resumedAt atomic.Value
	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.NewWorker[pgx.Tx, killedJob](h.engine, h.op, func(context.Context, []byte) (idem.PhaseFunc[pgx.Tx], error) {
		return func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			resumedAt.Store(at.RecoveryPoint())
			if _, err := at.Tx().Exec(ctx, `INSERT INTO effects (key, account) VALUES ($1, 'takeover')`, at.Key()); err != nil {
				return "", nil, err
			}
			return "", created(`{"account":"acct"}`), nil
		}, nil
	}, slog.New(slog.DiscardHandler)))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{"idle": {MaxWorkers: 1}},
		Workers:              workers,
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		RescueStuckJobsAfter: time.Hour,
		RetryPolicy:          retryAtOnce{},
		Logger:               slog.New(slog.DiscardHandler),
		TestOnly:             true,
	})
	if err != nil {
		t.Fatal(err)
	}
	events := finished(t, client)
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	rescuer := idemriver.NewRescuer(client, pool, pgstore.New(pool, pgstore.Options{}), idemriver.RescuerOptions{Grace: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	listen, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Close(context.Background())
	if _, err := listen.Exec(context.Background(), `LISTEN killed_worker`); err != nil {
		t.Fatal(err)
	}

	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), workerEnv+"="+url)
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Kill(); _ = worker.Wait() })
	r := httptest.NewRequest("POST", "/exports", nil)
	r.Header.Set(idem.HeaderKey, "exp-killed")
	resp, err := h.engine.ServeAsync(idem.WithRequest(context.Background(), r), h.op, []byte("acct"), exportRequest{Account: "acct"},
		idemriver.Enqueue[pgx.Tx](h.insert, func(a idem.Accepted) killedJob { return killedJob{exportJob{idemriver.ArgsOf(a)}} }))
	if err != nil || resp.Status != http.StatusAccepted {
		t.Fatalf("accept: %v %+v", err, resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := listen.WaitForNotification(ctx); err != nil {
		t.Fatalf("the worker process never ran the second phase: %v", err)
	}
	if run := rescuer.RunOnce(ctx); run.Err != nil || run.Running != 1 || run.Rescued != 0 {
		t.Fatalf("rescuer while the worker holds the lease: %+v, want the job seen and left alone", run)
	}
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	// The lease of a minute passes at once, as it would in a minute.
	if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE key = 'exp-killed'`); err != nil {
		t.Fatal(err)
	}
	if run := rescuer.RunOnce(ctx); run.Err != nil || run.Rescued != 1 {
		t.Fatalf("rescuer once the lease passed: %+v, want one job rescued", run)
	}
	if run := rescuer.RunOnce(ctx); run.Err != nil || run.Rescued != 0 {
		t.Fatalf("rescuer run again: %+v, want the stuck job rescued once only", run)
	}
	if err := client.Queues().Add(killedQueue, river.QueueConfig{MaxWorkers: 2}); err != nil {
		t.Fatal(err)
	}
	await(t, events, 1)
	var first, killed, takeover int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE account = 'first phase'), count(*) FILTER (WHERE account = 'killed'),
		count(*) FILTER (WHERE account = 'takeover') FROM effects WHERE key = 'exp-killed'`).Scan(&first, &killed, &takeover); err != nil {
		t.Fatal(err)
	}
	if first != 1 || killed != 0 || takeover != 1 {
		t.Errorf("effects: first phase %d, killed phase %d, takeover %d; want 1, 0, 1", first, killed, takeover)
	}
	if p, _ := resumedAt.Load().(string); p != "written" {
		t.Errorf("the takeover ran from recovery point %q, want written", p)
	}
	if resp, st := h.status("exp-killed", ""); st.Status != idem.AsyncSucceeded {
		t.Errorf("status after the takeover: %d %s", resp.Status, resp.Body)
	}
}

// roundTrips counts the queries and batches sent on a pool's connections
// for requests, but the notification River sends after an insert, at
// most once per queue in a short while, so that workers fetch at once:
// River's own, and not every insert's.
type roundTrips struct {
	n   atomic.Int64
	mu  sync.Mutex
	sql []string
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "name: PGNotifyMany") {
		r.n.Add(1)
		r.mu.Lock()
		q := strings.Join(strings.Fields(d.SQL), " ")
		r.sql = append(r.sql, q[:min(len(q), 60)])
		r.mu.Unlock()
	}
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Accepting a request with River's InsertTx costs three round trips, one
// commit, as an atomic first execution does: the lookup, which claims the
// free key; BEGIN with River's insert; the key's row with COMMIT (and, now
// and then, River's notification of the insert); on a pool of one
// connection too.
func TestAcceptRoundTrips(t *testing.T) {
	t.Parallel()
	trips := &roundTrips{}
	// One connection, so that the warm-up prepared every statement on the
	// connection the counted request uses.
	pool := poolOfOne(t, trips)
	h := newHarness(t, pool, idem.Options{})
	for i := range 3 { // warm: the secret, and each query prepared once
		h.post(fmt.Sprintf("warm-%d", i), "", "acct")
	}
	before := trips.n.Load()
	if resp := h.post("trips", "", "acct"); resp.Status != http.StatusAccepted {
		t.Fatalf("accept: %d %s", resp.Status, resp.Body)
	}
	if n := trips.n.Load() - before; n != 3 {
		trips.mu.Lock()
		defer trips.mu.Unlock()
		t.Errorf("accepting took %d round trips, want 3: %q", n, trips.sql[max(0, len(trips.sql)-int(n)-3):])
	}
	if _, st := h.status("trips", ""); st.Status != idem.AsyncPending && st.Status != idem.AsyncRunning && st.Status != idem.AsyncSucceeded {
		t.Errorf("status after the accept: %q", st.Status)
	}
}

// Copies of a first request sent at once, while the first of them is
// being accepted, get 202 too, never 409: they wait the moment it takes
// for its row to show. One row, one job. On a pool of four connections
// and of one.
func TestAsyncDuplicatesWhileAccepting(t *testing.T) {
	t.Parallel()
	for _, size := range []int32{4, 1} {
		t.Run(fmt.Sprintf("MaxConns=%d", size), func(t *testing.T) {
			t.Parallel()
			cfg, err := pgxpool.ParseConfig(newPool(t).Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = size
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			h := newHarness(t, pool, idem.Options{})
			const copies = 8
			for round := range 5 {
				key := fmt.Sprintf("dup-%d", round)
				start := make(chan struct{})
				statuses := make([]int, copies)
				var wg sync.WaitGroup
				for i := range copies {
					wg.Go(func() {
						r := httptest.NewRequest("POST", "/v1/exports", nil)
						r.Header.Set(idem.HeaderKey, key)
						<-start
						resp, err := h.engine.ServeAsync(idem.WithRequest(context.Background(), r), h.op, []byte("acct"),
							exportRequest{Account: "acct"}, idemriver.Enqueue[pgx.Tx](h.insert, newExportJob))
						if err != nil {
							t.Error(err)
							return
						}
						statuses[i] = resp.Status
					})
				}
				close(start)
				wg.Wait()
				for i, st := range statuses {
					if st != http.StatusAccepted {
						t.Errorf("%s: copy %d answered %d, want 202", key, i, st)
					}
				}
				var jobs int
				if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'key' = $1`, key).Scan(&jobs); err != nil {
					t.Fatal(err)
				}
				if jobs != 1 {
					t.Errorf("%s: %d jobs, want 1", key, jobs)
				}
			}
		})
	}
}

// A run that River's stop cuts off (its context canceled) is snoozed to
// run again, not counted as an attempt, and on the last attempt it stores
// no failure: the request is not the one that failed.
func TestWorkCutByStopIsSnoozed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newPool(t), idem.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	h.handle = func(ctx context.Context, at *idem.Attempt[pgx.Tx], req exportRequest) (idem.Writer, error) {
		cancel() // River's StopAndCancel, while the handler runs
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if resp := h.post("exp-stop", "", "acct"); resp.Status != http.StatusAccepted {
		t.Fatalf("accept: %d %s", resp.Status, resp.Body)
	}
	w := idemriver.NewWorker[pgx.Tx, exportJob](h.engine, h.op, h.phases, slog.New(slog.DiscardHandler))
	job := &river.Job[exportJob]{JobRow: &rivertype.JobRow{Attempt: 3, MaxAttempts: 3}, Args: exportJob{idemriver.Args{Operation: "createExport", Key: "exp-stop", Generation: 1}}}
	err := w.Work(ctx, job)
	var snooze *rivertype.JobSnoozeError
	if !errors.As(err, &snooze) || snooze.Duration != 0 {
		t.Fatalf("Work cut by a stop: %v, want JobSnooze(0)", err)
	}
	if _, st := h.status("exp-stop", ""); st.Status != idem.AsyncPending {
		t.Errorf("status after the cut run: %q, want pending (no failure stored)", st.Status)
	}
}

// An accept that finds no connection free within the store's acquire
// bound is told the store is busy (503 store-busy with Retry-After), and
// leaves neither a key row nor a job; once a connection is free, the
// same request is accepted, with one job.
func TestAcceptWithNoFreeConnectionIsBusy(t *testing.T) {
	t.Parallel()
	pool := poolOfOne(t, nil)
	h := newHarness(t, pool, idem.Options{})
	h.engine = idem.NewEngine[pgx.Tx](pgstore.New(pool, pgstore.Options{AcquireTimeout: 100 * time.Millisecond}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	if resp := h.post("warm", "", "acct"); resp.Status != http.StatusAccepted {
		t.Fatalf("warm-up accept: %d %s", resp.Status, resp.Body)
	}
	held, err := pool.Acquire(context.Background()) // the pool's one connection, busy elsewhere
	if err != nil {
		t.Fatal(err)
	}
	resp := h.post("busy", "", "acct")
	count := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, sql string) int {
		var n int
		if err := q.QueryRow(context.Background(), sql, "busy").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rows := count(held, `SELECT count(*) FROM idempotency_keys WHERE key = $1`)
	jobs := count(held, `SELECT count(*) FROM river_job WHERE args->>'key' = $1`)
	held.Release()
	var problem struct{ Type string }
	if err := json.Unmarshal(resp.Body, &problem); err != nil || resp.Status != http.StatusServiceUnavailable || problem.Type != idem.TypeStoreBusy || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("accept on a full pool: %d %s (Retry-After %q), want 503 store-busy with Retry-After", resp.Status, resp.Body, resp.Header.Get("Retry-After"))
	}
	if rows != 0 || jobs != 0 {
		t.Fatalf("the refused accept left %d key rows and %d jobs, want none", rows, jobs)
	}
	if resp := h.post("busy", "", "acct"); resp.Status != http.StatusAccepted {
		t.Fatalf("the retry once a connection is free: %d %s, want 202", resp.Status, resp.Body)
	}
	if n := count(pool, `SELECT count(*) FROM river_job WHERE args->>'key' = $1`); n != 1 {
		t.Fatalf("%d jobs after the retry, want 1", n)
	}
}

// poolOfOne returns a pool of one connection on a database newPool
// prepares, traced by tracer when it is not nil.
func poolOfOne(t *testing.T, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(newPool(t).Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
