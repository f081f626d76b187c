// Package server runs the example orders API: it finds its database,
// applies the migrations and serves the generated handler.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemriver"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
	"github.com/idemgen/idemgen/internal/pglocal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"
)

// Config configures Start; the zero value serves on a free loopback port
// against the local PostgreSQL.
type Config struct {
	// Addr is the listen address; "" picks a free port on 127.0.0.1.
	Addr string
	// DatabaseURL is the PostgreSQL to use; "" finds or starts a local one
	// (see pglocal) and uses its idemgen_example database.
	DatabaseURL string
	// Throwaway, with no DatabaseURL, gives this run a database of its
	// own on the local PostgreSQL, dropped when the server closes, in
	// place of idemgen_example, which stays between runs: the demo's.
	Throwaway bool
	// WorkDelay makes createOrder wait inside its attempt.
	WorkDelay time.Duration
	// PSPURL is the payment provider createPayment charges; "" starts the
	// example's fake provider (package psp) inside this process.
	PSPURL string
	// CrashAt makes the process die abruptly, with SIGKILL and no cleanup,
	// when createPayment reaches this point: one of orders.CrashAfterClaim,
	// CrashAfterCharge, CrashAfterReceipt and CrashBeforeResponse. For demos and tests of
	// what a retry does after a crash.
	CrashAt string
	// CompleteAfter, when set, replaces createPayment's complete-after
	// (10m in the spec): how long after its lease passed an abandoned
	// payment is finished by the completer. CompleterInterval is the time
	// between the completer's runs; zero means a minute.
	CompleteAfter, CompleterInterval time.Duration
	// DBStats counts the statements the API sends to PostgreSQL and
	// serves the counts as JSON at GET /debug/db-stats, for the load
	// benchmark (go run ./bench). POST /debug/db-stats/flush first makes
	// the pool's idle connections publish their pg_stat_database counts,
	// which PostgreSQL otherwise does lazily.
	DBStats bool
	// Routes, when set, adds routes beside the API's, on the same pool
	// (and statement counter): the load benchmark's hand-written
	// idempotency designs (bench/peers).
	Routes func(ctx context.Context, pool *pgxpool.Pool, mux *http.ServeMux) error
	// RedisURL, when set, puts a Redis replay filter in front of the key
	// store (redisfilter): replays of completed keys are answered from
	// Redis, everything else by PostgreSQL. A Redis that is down only
	// costs its help.
	RedisURL string
	// TracerProvider receives the spans of requests and of River's job
	// runs; nil is OpenTelemetry's global one.
	TracerProvider trace.TracerProvider
	// Webhooks makes the in-process fake provider (no PSPURL) send its
	// payment.succeeded events to this server's POST /webhooks/psp,
	// signed with WebhookSecret, or with a random secret of its own.
	Webhooks bool
	// WebhookSecret, when set, is the provider's webhook secret (whsec_
	// and base64): each delivery to POST /webhooks/psp must be signed
	// with it, or it is a 401 before anything runs. "" verifies nothing.
	WebhookSecret string
	// AuthSecret is the secret of the API's bearer tokens (see Token):
	// every request must carry the token of the account in its
	// X-Account-Id. "" is DemoSecret, which is public: Start warns.
	AuthSecret string
	Logger     *slog.Logger
}

// Server is a running orders API.
type Server struct {
	// URL is the base URL it serves, e.g. http://127.0.0.1:8080.
	URL string
	// PSPURL is the payment provider's base URL: Config.PSPURL, or the
	// fake one started in this process.
	PSPURL string
	// Fake is the fake provider started in this process; nil with
	// Config.PSPURL.
	Fake *psp.Fake

	http  *http.Server
	psp   *http.Server // the in-process fake provider, if any
	pool  *pgxpool.Pool
	redis *redis.Client // the replay filter's, if any
	local *pglocal.Server
	// dropDatabase is the throwaway database to drop at close; "" for none.
	dropDatabase string
	log          *slog.Logger
	done         chan error
	stopJanitor  context.CancelFunc
	telemetry    *telemetry
	janitorDone  chan struct{}
	// river runs createExport's accepted requests; nil until started.
	river *river.Client[pgx.Tx]

	inFlight     atomic.Int64  // requests being served
	refusing     chan struct{} // closed once the listener is closed
	shutdownOnce sync.Once
	shutdownErr  error
}

// Handler serves impl with the idempotency layer on the Postgres store,
// behind the account check with authSecret ("" is DemoSecret). The strict
// middlewares run around every operation, outside the protocol, inside
// the account check.
//
// createExport's jobs are inserted with an insert-only River client: run
// workers for them with gen.AddIdempotentWorkers, as Start does.
func Handler(impl gen.IdempotentServer[pgx.Tx], pool *pgxpool.Pool, log *slog.Logger, authSecret string, middlewares ...gen.StrictMiddlewareFunc) http.Handler {
	return handler(impl, pgstore.New(pool, pgstore.Options{}), idem.Options{Logger: log}, nil, authSecret, middlewares...)
}

func handler(impl gen.IdempotentServer[pgx.Tx], store *pgstore.Store, opts idem.Options, jobs *river.Client[pgx.Tx], authSecret string, middlewares ...gen.StrictMiddlewareFunc) http.Handler {
	// The last strict middleware is the outermost: a refused request
	// reaches none of the others (a crash point, say).
	middlewares = append(slices.Clone(middlewares), Authenticate(authSecret))
	return gen.NewIdempotentHandler(impl, store, gen.IdempotentHandlerOptions{
		Options:           opts,
		StrictMiddlewares: middlewares,
		River:             jobs,
	})
}

// crashPoints are the valid values of Config.CrashAt.
var crashPoints = []string{orders.CrashAfterClaim, orders.CrashAfterCharge, orders.CrashAfterReceipt, orders.CrashBeforeResponse}

// crasher returns the function that kills the process at point, or nil.
func crasher(point string, log *slog.Logger) func(string) {
	if point == "" {
		return nil
	}
	return func(at string) {
		if at != point {
			return
		}
		log.Warn("orders-api: crashing on purpose", "at", at)
		// SIGKILL, not os.Exit: nothing runs after it, as in a real crash.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// crashBeforeResponse calls crash after createPayment's response has been
// stored, before it is written.
func crashBeforeResponse(crash func(string)) gen.StrictMiddlewareFunc {
	return func(f gen.StrictHandlerFunc, operationID string) gen.StrictHandlerFunc {
		if operationID != "CreatePayment" {
			return f
		}
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			resp, err := f(ctx, w, r, request)
			crash(orders.CrashBeforeResponse)
			return resp, err
		}
	}
}

// Start connects, migrates and starts serving.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.CrashAt != "" && !slices.Contains(crashPoints, cfg.CrashAt) {
		return nil, fmt.Errorf("crash point %q is unknown; expected one of %s", cfg.CrashAt, strings.Join(crashPoints, ", "))
	}
	s := &Server{done: make(chan error, 1), PSPURL: cfg.PSPURL, log: log, refusing: make(chan struct{})}
	if err := s.start(ctx, cfg, log); err != nil {
		s.Close() // what started before the failure
		return nil, err
	}
	return s, nil
}

// dbProblem says what to do about a database that cannot be used.
func dbProblem(cfg Config, err error) error {
	if cfg.DatabaseURL != "" {
		return fmt.Errorf("the database in DATABASE_URL cannot be used: %w; fix DATABASE_URL, or unset it to use the PostgreSQL on 127.0.0.1:5432 or a throwaway cluster", err)
	}
	return fmt.Errorf("the local database cannot be used: %w", err)
}

func (s *Server) start(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	url := cfg.DatabaseURL
	if url == "" {
		if s.local, err = pglocal.Start(ctx, pglocal.Options{Logger: log}); err != nil {
			return err
		}
		name := "idemgen_example"
		if cfg.Throwaway {
			name = "idemgen_demo_" + strings.ToLower(rand.Text()[:12])
			s.dropDatabase = name
		}
		if url, err = exampleDatabase(ctx, s.local.URL, name); err != nil {
			return err
		}
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return dbProblem(cfg, err)
	}
	if poolCfg.ConnConfig.ConnectTimeout == 0 {
		// A connection opened into a partition gives up instead of
		// holding a place in the pool for minutes (connect_timeout in the
		// URL overrides it).
		poolCfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	var stats *dbStats
	if cfg.DBStats {
		stats = newDBStats()
		poolCfg.ConnConfig.Tracer = stats
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return dbProblem(cfg, err)
	}
	if err := s.pool.Ping(ctx); err != nil {
		return dbProblem(cfg, err)
	}
	if err := orders.Migrate(ctx, s.pool); err != nil {
		return err
	}
	// Migrate made the schema, so this passes here; a server whose
	// migrations run elsewhere fails at start instead of serving 500s.
	if err := pgstore.Check(ctx, s.pool); err != nil {
		return err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; pick another address with -addr", addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	if s.PSPURL == "" {
		if err := s.startFakePSP(log, cfg); err != nil {
			ln.Close()
			return err
		}
	}
	crash := crasher(cfg.CrashAt, log)
	svc := &orders.Service{
		Pool:      s.pool,
		WorkDelay: cfg.WorkDelay,
		PSP:       &psp.Client{BaseURL: s.PSPURL, HTTP: &http.Client{Timeout: 10 * time.Second}},
		Crash:     crash,
	}
	var middlewares []gen.StrictMiddlewareFunc
	if crash != nil {
		middlewares = append(middlewares, crashBeforeResponse(crash))
	}
	tel, err := newTelemetry(cfg.TracerProvider)
	if err != nil {
		return err
	}
	s.telemetry = tel
	storeOpts := pgstore.Options{}
	if cfg.RedisURL != "" {
		if storeOpts.ReplayCache, err = s.replayFilter(ctx, cfg.RedisURL, log); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	if cfg.AuthSecret == "" {
		log.Warn("orders-api: bearer tokens are made with the public demo secret, so anyone can make any account's; set a secret of your own (orders-api: ORDERS_AUTH_SECRET) anywhere but on your own machine")
	}
	// River runs createExport's accepted requests, on this service's
	// workers, from the same database.
	if s.river, err = startRiver(ctx, s.pool, svc, idem.Options{Logger: log, Tracer: tel.tracer}, tel.river, log); err != nil {
		ln.Close()
		return err
	}
	api := handler(svc, pgstore.New(s.pool, storeOpts), idem.Options{Logger: log, Tracer: tel.tracer}, s.river, cfg.AuthSecret, middlewares...)
	if cfg.WebhookSecret != "" {
		if api, err = VerifyWebhooks(cfg.WebhookSecret, api); err != nil {
			ln.Close()
			return fmt.Errorf("the webhook secret cannot be used: %w; give the provider's, whsec_ followed by base64", err)
		}
	} else {
		log.Warn("orders-api: the payment provider's webhooks are not verified; set its secret (orders-api: PSP_WEBHOOK_SECRET) anywhere but on your own machine")
	}
	mux.Handle("/", api)
	mux.Handle("GET /metrics", tel.metrics)
	if cfg.Routes != nil {
		if err := cfg.Routes(ctx, s.pool, mux); err != nil {
			return err
		}
	}
	s.http = &http.Server{
		Handler: mux,
		// A client that sends slowly, or idles, cannot hold a connection
		// for ever. Bodies go up to 32 MiB, and createOrder may be told to
		// work for a while (WorkDelay).
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      2*time.Minute + cfg.WorkDelay,
		IdleTimeout:       2 * time.Minute,
	}
	if stats != nil {
		stats.mount(s.http, s.pool)
	}
	served := s.http.Handler
	s.http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		served.ServeHTTP(w, r)
	})
	// Shutdown runs this once it has closed the listener.
	s.http.RegisterOnShutdown(func() { close(s.refusing) })
	go func() { s.done <- s.http.Serve(ln) }()

	// The janitor reports abandoned attempts and deletes expired keys;
	// the completer finishes the payments whose clients gave up; the
	// rescuer takes over the exports whose worker died, once their lease
	// has passed.
	janitorCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopJanitor, s.janitorDone = stop, make(chan struct{})
	completer := gen.NewIdempotentCompleter[pgx.Tx](svc, pgstore.New(s.pool, pgstore.Options{}),
		idem.Options{Logger: log, Tracer: tel.tracer},
		idem.CompleterOptions{CompleteAfter: cfg.CompleteAfter, Interval: cfg.CompleterInterval})
	rescuer := idemriver.NewRescuer(s.river, s.pool, pgstore.New(s.pool, pgstore.Options{}), idemriver.RescuerOptions{Logger: log})
	var maintenance sync.WaitGroup
	maintenance.Add(3)
	go func() {
		defer maintenance.Done()
		_ = pgstore.NewJanitor(pgstore.New(s.pool, pgstore.Options{}), pgstore.JanitorOptions{Logger: log, Tracer: tel.tracer}).Run(janitorCtx)
	}()
	go func() {
		defer maintenance.Done()
		_ = completer.Run(janitorCtx)
	}()
	go func() {
		defer maintenance.Done()
		_ = rescuer.Run(janitorCtx)
	}()
	go func() {
		maintenance.Wait()
		close(s.janitorDone)
	}()

	log.Info("orders-api: listening", "url", s.URL, "version", idem.Version(), "psp_url", s.PSPURL, "work_delay", cfg.WorkDelay, "crash_at", cfg.CrashAt)
	return nil
}

// startFakePSP serves the example's fake payment provider on a free
// loopback port; with cfg.Webhooks, it sends its events to this server.
func (s *Server) startFakePSP(log *slog.Logger, cfg Config) error {
	s.Fake = psp.NewFake()
	if cfg.Webhooks {
		var err error
		if s.Fake, err = psp.NewFakeSending(psp.WebhookOptions{URL: s.URL + webhookPath, Secret: cfg.WebhookSecret}); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the fake payment provider: %w", err)
	}
	s.PSPURL = "http://" + ln.Addr().String()
	s.psp = &http.Server{Handler: s.Fake, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.psp.Serve(ln) }()
	log.Info("orders-api: started the fake payment provider", "url", s.PSPURL)
	return nil
}

// exampleDatabase creates the database name on a local server if it does
// not exist yet, and returns its URL.
func exampleDatabase(ctx context.Context, adminURL, name string) (string, error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("find the database %s: %w", name, err)
	}
	if !exists {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		var pgErr interface{ SQLState() string }
		// Another process may have created it at the same moment: it then
		// exists (42P04), or both inserted into pg_database at once (23505).
		if err != nil && !(errors.As(err, &pgErr) && (pgErr.SQLState() == "42P04" || pgErr.SQLState() == "23505")) {
			return "", fmt.Errorf("create the database %s: %w", name, err)
		}
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name), nil
}

// Wait blocks until the server stops serving: it failed, or Shutdown (or
// Close) began. Requests may still be in flight when it returns; Shutdown
// returns once they have finished.
func (s *Server) Wait() error {
	err := <-s.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// InFlight is the number of requests being served.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// Shutdown drains the server. It closes the listener at once, so that new
// connections are refused, and closes idle connections; it waits for the
// requests in flight to finish and their responses to be written (each
// stored with its key first), until ctx is done. Requests still running
// then are cut off: their connections are closed and their contexts
// cancelled, so their attempts roll back and a retry runs them again.
// Only then does it stop the janitor and the fake payment provider and
// close the database. It logs each step, and returns an error naming the
// requests cut off when ctx ended the drain. Later calls return the first
// call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	if s.http != nil {
		began := time.Now()
		drained := make(chan error, 1)
		go func() { drained <- s.http.Shutdown(ctx) }()
		<-s.refusing
		attrs := []any{"in_flight", s.InFlight()}
		if deadline, ok := ctx.Deadline(); ok {
			attrs = append(attrs, "timeout", time.Until(deadline).Round(time.Millisecond))
		}
		s.log.Info("orders-api: draining", append(attrs, "new_connections", "refused")...)
		if err := <-drained; err != nil {
			// The bound has passed. Closing the connections left cancels
			// their requests' contexts.
			cut := s.InFlight()
			_ = s.http.Close()
			s.log.Error("orders-api: drain timed out", "cut_off", cut, "took", time.Since(began).Round(time.Millisecond), "error", err)
			errs = append(errs, fmt.Errorf("drain: cut off %d requests still in flight: %w", cut, err))
		} else {
			s.log.Info("orders-api: drained", "took", time.Since(began).Round(time.Millisecond))
		}
	}
	if s.stopJanitor != nil {
		s.stopJanitor()
		<-s.janitorDone
		s.log.Info("orders-api: janitor stopped")
	}
	if s.river != nil {
		// River's graceful stop: the jobs running finish, within ctx;
		// those it cuts off are retried by the next worker to run.
		began := time.Now()
		if err := s.river.Stop(ctx); err != nil {
			// Out of time: cancel the jobs still running; each rolls
			// back, and River runs it again later.
			cancelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.river.StopAndCancel(cancelCtx)
			cancel()
			errs = append(errs, fmt.Errorf("stop River's workers: %w", err))
		} else {
			s.log.Info("orders-api: workers stopped", "took", time.Since(began).Round(time.Millisecond))
		}
	}
	if s.psp != nil {
		// The API's requests, its only client, have ended.
		pspCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.psp.Shutdown(pspCtx))
		cancel()
		s.Fake.Close() // its deliveries to this server, which has stopped
	}
	if s.pool != nil {
		// Waits for the connections of requests cut off to come back:
		// their handlers return once their contexts are cancelled.
		s.pool.Close()
	}
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
	}
	if s.dropDatabase != "" {
		errs = append(errs, dropDatabase(s.local.URL, s.dropDatabase))
	}
	if s.local != nil {
		errs = append(errs, s.local.Close())
	}
	return errors.Join(errs...)
}

// dropDatabase drops a throwaway database, ending any session a request
// cut off left in it.
func dropDatabase(adminURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("drop the database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop the database %s: %w", name, err)
	}
	return nil
}

// replayFilter connects to the Redis at url for the store's replay
// filter. A Redis that does not answer yet is only logged: the filter
// falls back to PostgreSQL until it does.
func (s *Server) replayFilter(ctx context.Context, url string, log *slog.Logger) (*redisfilter.Filter, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("the Redis URL %q cannot be used: %w; give one such as redis://127.0.0.1:6379/0", url, err)
	}
	opts.ContextTimeoutEnabled = true // the filter bounds each call
	s.redis = redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.redis.Ping(pingCtx).Err(); err != nil {
		log.Warn("orders-api: the replay filter's Redis does not answer; replays read PostgreSQL until it does", "redis", opts.Addr, "error", err)
	}
	return redisfilter.New(s.redis, redisfilter.Options{Logger: log})
}

// Close is Shutdown with five seconds for the requests in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// startRiver starts the River client that runs createExport's accepted
// requests with svc, and the receipts createPayment stages, on River's
// default queue, and gives svc the client to stage them with. A worker
// that dies is taken over once its lease has passed (the rescuer Start
// runs), and resumes where it stopped; River's own rescue is the backstop.
func startRiver(ctx context.Context, pool *pgxpool.Pool, svc *orders.Service, opts idem.Options, otel rivertype.Middleware, log *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	gen.AddIdempotentWorkers(workers, svc, pgstore.New(pool, pgstore.Options{}), opts)
	river.AddWorker(workers, &orders.ReceiptWorker{Pool: pool})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers,
		// On the jobs this client inserts (the request's trace goes
		// with them) and on those it works (their runs link to it).
		Middleware: []rivertype.Middleware{otel},
		// The backstop behind the rescuer: a job whose worker died is
		// retried this long after it started (and once past its run's
		// bound), a little over createExport's lease of 1m, rather than
		// River's hour.
		RescueStuckJobsAfter: 2 * time.Minute,
		Logger:               log,
	})
	if err != nil {
		return nil, fmt.Errorf("River: %w", err)
	}
	svc.Jobs = client
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start River's workers: %w", err)
	}
	return client, nil
}
