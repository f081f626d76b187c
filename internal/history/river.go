package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
)

// RiverWorkers is the number of live workers River runs an async
// harness's jobs on: when one dies, another starts, as an orchestrator
// restarts a killed process.
const RiverWorkers = 3

// maxAttempts are River's attempts of a job, few so that a request that
// fails every run runs out of them within a run of the checker.
const maxAttempts = 5

// exportJob is the job type of the async operation.
type exportJob struct{ idemriver.Args }

func (exportJob) Kind() string { return idemriver.JobKind(AsyncOperation) }

// quickRetries retries a failed job soon, so that a job runs out of its
// attempts within a run of the checker, and a store that stopped
// answering a while is not one.
type quickRetries struct{}

func (quickRetries) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(job.Attempt*job.Attempt) * 50 * time.Millisecond)
}

// WithRiver gives h, a Postgres harness on pool (whose database has River's
// tables too), an async operation run by River: its jobs are inserted
// with the claim, run by RiverWorkers workers, each a process of its own
// (a pool, a store and an engine), which die as a disturbance where a
// request says so; idemriver's Rescuer takes their requests over once
// the lease has passed. storeOpts are the workers' stores' options.
func WithRiver(t testing.TB, h *Harness[pgx.Tx], pool *pgxpool.Pool, storeOpts pgstore.Options) {
	// An insert-only client, as a server that runs no workers has: its
	// MaxAttempts are the jobs'.
	insert, err := river.NewClient(riverpgxv5.New(nil), &river.Config{MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	w := &riverWorkers{t: t, connString: pool.Config().ConnString(), storeOpts: storeOpts, dead: make(chan struct{})}
	// The checker's own statements, which a stall does not reach. Its
	// pools are small: the test suite's databases share one server's
	// connections.
	cfg, err := pgxpool.ParseConfig(w.connString)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	admin, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.admin = admin
	var rescuer *idemriver.Rescuer
	// Cleanups run last first: the dead workers' runs return, then every
	// worker stops, then the pools close.
	t.Cleanup(admin.Close)
	t.Cleanup(w.stop)
	t.Cleanup(func() { close(w.dead) })
	t.Cleanup(func() {
		t.Logf("%d workers died mid-run; the rescuer took over %d requests", w.deaths.Load(), w.rescued.Load())
	})
	h.Async = &Async[pgx.Tx]{
		Enqueue: idemriver.Enqueue[pgx.Tx](insert, func(a idem.Accepted) exportJob { return exportJob{idemriver.ArgsOf(a)} }),
		Start: func(t testing.TB, work AsyncWork[pgx.Tx]) {
			w.work = work
			// A grace of half a lease: a worker whose run has just failed
			// and released its lease is not taken for dead while River
			// records the failure, but on a machine loaded enough to take
			// that long; the rescue then runs the request once more, fenced,
			// with attempts of its own.
			rescuer = idemriver.NewRescuer(insert, admin, pgstore.New(admin, pgstore.Options{}),
				idemriver.RescuerOptions{Grace: work.Operation.Lease / 2, Logger: slog.New(slog.DiscardHandler)})
			for range RiverWorkers {
				w.start()
			}
		},
		Rescue: func(t testing.TB) {
			run := rescuer.RunOnce(context.Background())
			if run.Err != nil {
				t.Errorf("rescuer: %v", run.Err)
			}
			w.rescued.Add(int64(run.Rescued))
		},
		Drain: func(t testing.TB) []string {
			// Bounds a hang, never the machine's speed: the leases of dead
			// workers pass within a second, and their requests run again.
			deadline := time.Now().Add(2 * time.Minute)
			for {
				var left []string
				rows, err := admin.Query(context.Background(), `SELECT scope || '/' || key FROM idempotency_keys
					WHERE operation = $1 AND status = 'in_flight' ORDER BY 1`, AsyncOperation)
				if err == nil {
					left, err = pgx.CollectRows(rows, pgx.RowTo[string])
				}
				if err != nil {
					t.Fatalf("list the async requests in flight: %v", err)
				}
				if len(left) == 0 {
					return nil
				}
				if time.Now().After(deadline) {
					return []string{fmt.Sprintf("async requests still in flight two minutes after every client was done: %v; their rows and jobs:\n%s", left, w.report())}
				}
				run := rescuer.RunOnce(context.Background())
				w.rescued.Add(int64(run.Rescued))
				time.Sleep(50 * time.Millisecond) // polls the workers' progress, which nothing signals here
			}
		},
	}
}

// riverWorkers are the live workers of an async harness, and the dead.
type riverWorkers struct {
	t          testing.TB
	connString string
	storeOpts  pgstore.Options
	admin      *pgxpool.Pool
	work       AsyncWork[pgx.Tx]
	// dead is closed once the checker is done: the runs of the workers
	// that died return then.
	dead            chan struct{}
	deaths, rescued atomic.Int64

	mu      sync.Mutex
	workers []*riverWorker
}

// riverWorker is one worker process: a pool, and a River client running
// the async operation's jobs one at a time.
type riverWorker struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
}

// start starts a worker.
func (w *riverWorkers) start() {
	t := w.t
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(w.connString)
	if err != nil {
		t.Fatal(err)
	}
	// One connection for the run's attempt, one for River's fetches and
	// its record of the jobs it ran.
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rw := &riverWorker{pool: pool}
	engine := idem.NewEngine[pgx.Tx](pgstore.New(pool, w.storeOpts), w.work.Options)
	phases := func(ctx context.Context, request []byte) (idem.PhaseFunc[pgx.Tx], error) {
		return w.work.Phases(ctx, request, func(ctx context.Context, at *idem.Attempt[pgx.Tx]) { w.die(rw, at) })
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, idemriver.NewWorker[pgx.Tx, exportJob](engine, w.work.Operation, phases, slog.New(slog.DiscardHandler)))
	rw.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers: workers,
		// Polling, without LISTEN's connection of its own, often enough
		// for runs of a second, seldom enough not to load the machine.
		PollOnly:          true,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		MaxAttempts:       maxAttempts,
		RetryPolicy:       quickRetries{},
		// River's own rescue would come an hour later: the rescuer's
		// takeover is what the checker proves.
		RescueStuckJobsAfter: time.Hour,
		Logger:               slog.New(slog.DiscardHandler),
		TestOnly:             true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.workers = append(w.workers, rw)
	w.mu.Unlock()
}

// die kills worker rw in the middle of a run of at, as SIGKILL would: its
// connection to the store is ended, it fetches no more jobs, another
// worker starts in its place, and the run never returns while the checker
// runs. Its job stays running in River's eyes.
func (w *riverWorkers) die(rw *riverWorker, at *idem.Attempt[pgx.Tx]) {
	w.deaths.Add(1)
	pid := at.Tx().Conn().PgConn().PID()
	if _, err := w.admin.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		w.t.Errorf("kill the worker's connection: %v", err)
	}
	// River's stop stops fetching at once, and returns once this run does.
	go func() { _ = rw.client.Stop(context.Background()) }()
	w.start()
	<-w.dead
}

// stop stops every worker and closes its pool.
func (w *riverWorkers) stop() {
	w.mu.Lock()
	workers := w.workers
	w.mu.Unlock()
	for _, rw := range workers {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := rw.client.StopAndCancel(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			w.t.Errorf("stop a worker: %v", err)
		}
		cancel()
		rw.pool.Close()
	}
}

// report describes the async requests in flight and their jobs, for a
// failed drain.
func (w *riverWorkers) report() string {
	ctx := context.Background()
	var b strings.Builder
	rows, err := w.admin.Query(ctx, `SELECT scope, key, generation, attempt, recovery_point, extract(epoch FROM locked_until - now())
		FROM idempotency_keys WHERE operation = $1 AND status = 'in_flight'`, AsyncOperation)
	if err != nil {
		return err.Error()
	}
	type key struct {
		scope, key, point   string
		generation, attempt int64
		leaseLeft           float64
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (key, error) {
		var k key
		err := row.Scan(&k.scope, &k.key, &k.generation, &k.attempt, &k.point, &k.leaseLeft)
		return k, err
	})
	if err != nil {
		return err.Error()
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%s/%s generation %d attempt %d at %q, lease left %.1fs; jobs:\n", k.scope, k.key, k.generation, k.attempt, k.point, k.leaseLeft)
		rows, err := w.admin.Query(ctx, `SELECT id, state::text, attempt, max_attempts, args::text, coalesce(errors::text, '') FROM river_job
			WHERE args->>'scope' = $1 AND args->>'key' = $2 ORDER BY id`, k.scope, k.key)
		if err != nil {
			return err.Error()
		}
		for rows.Next() {
			var id int64
			var state, args, errs string
			var attempt, maxAttempts int
			if err := rows.Scan(&id, &state, &attempt, &maxAttempts, &args, &errs); err != nil {
				return err.Error()
			}
			fmt.Fprintf(&b, "\t\tjob %d %s attempt %d of %d %s %.300s\n", id, state, attempt, maxAttempts, args, errs)
		}
		rows.Close()
	}
	return b.String()
}
