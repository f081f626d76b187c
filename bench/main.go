// Command bench measures what the idempotency layer costs. It starts the
// example orders API (example/cmd/orders-api) as a separate process on a
// fresh PostgreSQL database and drives it over loopback, from this
// process, with a fixed number of keep-alive connections in a closed loop:
// the same insert without idempotency (the baseline), first executions,
// replays, 409s, 422s, a duplicate storm, and an async operation's accepts
// and status reads, side by side in one run. For each it prints requests
// per second, latency, the ratio to the baseline, the statements and
// commits per request counted by a pgx tracer in the server, and
// PostgreSQL's own transaction, transaction ID and WAL deltas.
// It also runs the Go benchmarks of the generated handler for allocations
// per request.
//
//	go run ./bench [-duration 10s] [-conns 16] [-json] [-hop 250us]
//	go run ./bench -generator
//
// With -generator it instead times idemgen generate against oapi-codegen
// alone on the largest real specs. See docs/PERFORMANCE.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	bigBodies  int
	bodyMiB    int
	conns      int
	rounds     int
	duration   time.Duration
	warmup     time.Duration
	scenarios  []string
	replayKeys int
	heldKeys   int
	stormKeys  int
	poolConns  int
	ownCluster bool
	// hop, when positive, is the delay added each way between the
	// servers and PostgreSQL (and Redis, with hopRedis).
	hop       time.Duration
	hopRedis  bool
	redisAddr string
	// scenariosSet is true when -scenarios was given: a scenario that
	// cannot run is then an error, not skipped.
	scenariosSet bool
	settle       time.Duration
	jsonOut      bool
	goBench      bool
	benchtime    string
	verbose      bool

	generator bool
	specs     string
	genRuns   int
	genTop    int

	// adminURL, when set, is the PostgreSQL to create the run's database
	// on, instead of finding one; for tests.
	adminURL string
}

const usage = `bench measures the price of the idempotency layer on the example orders API.

Usage:
  go run ./bench [flags]              the load run: a table of scenarios side by side
  go run ./bench -generator [flags]   idemgen generate next to oapi-codegen alone

The load run finds PostgreSQL as the tests do (DATABASE_URL, else
127.0.0.1:5432, else a throwaway cluster), creates a database for the run
and drops it at the end, builds and starts example/cmd/orders-api with
-db-stats, and drives it over loopback. Each scenario runs a warm-up, then
the measured duration; the clients run a closed loop, one keep-alive
connection each. Scenarios:

  baseline       POST /baseline/orders: the same insert, without idempotency
  atomic-first   POST /orders with a fresh Idempotency-Key per request
  peer-insert-update, peer-upsert
                 POST /orders's work behind the idempotency middlewares teams
                 write by hand (bench/peers): claim INSERT ... DO NOTHING, work,
                 UPDATE in three commits; or a claim that upserts on every request
  realistic-baseline, realistic-first
                 an order whose work is four statements (read the customer,
                 insert the order, its line items, an outbox event), without
                 and with the generated layer (bench/realistic)
  phased-first   POST /payments with fresh keys: three phases and a call to
                 the server's in-process fake payment provider per request
  async-accept   POST /exports (mode: async) with fresh keys: the claim and
                 River's insert of the job in one transaction, then 202; the
                 server's River workers run exports meanwhile, and the jobs
                 they have not started are deleted after the scenario
  read-by-id     GET /orders/{id} of existing orders: one indexed read, the
                 floor a replay should meet
  async-status   GET of the status resources of exports accepted beforehand
                 (-replay-keys of them), done or not yet: one read
  replay         POST /orders replaying keys completed beforehand
  peer-insert-update-replay, peer-upsert-replay
                 the same designs replaying keys completed beforehand
  422            POST /orders reusing completed keys with another body
  409            POST /orders on keys whose first attempt is in flight (held
                 open by this process in a transaction, as a running attempt does)
  storm          all clients on a few keys at a time, new keys every
                 conns x storm-keys requests
  atomic-first-redis, replay-redis
                 atomic-first and replay on a second orders-api started with
                 -redis-url redis://ADDR/0 (-redis): its Redis replay filter
                 in front of the key store; skipped like the fiber ones
  fiber-baseline, fiber-first, fiber-replay
                 the same insert in bench/fiberpeer, a server on Fiber v3:
                 without a key, then behind Fiber's idempotency middleware
                 and its Redis storage (-redis) with fresh keys, then
                 replaying keys completed beforehand; skipped when Redis
                 does not answer, unless named in -scenarios

With -hop DELAY the servers reach PostgreSQL and Redis through a delay
proxy that holds each chunk DELAY in each direction (a round trip costs
2 x DELAY, as across a network); the clients still reach the servers over
loopback. The report's "hop" says what ran and the round trips measured.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.conns, "conns", 16, "client connections, one goroutine each, in a closed loop")
	fs.IntVar(&o.bigBodies, "big-bodies", 30, "after the scenarios, send this many POST /realistic/orders at once, each body -body-mib MiB (one line item's SKU), and report the server's peak resident memory, then the same to the unannotated /realistic/baseline/orders, each on a fresh server; 0 skips it")
	fs.IntVar(&o.bodyMiB, "body-mib", 31, "the size of each -big-bodies body, in MiB (the server's limit is 32)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per scenario, in total over the rounds")
	fs.IntVar(&o.rounds, "rounds", 1, "run the scenarios this many times in turn, each for duration/rounds, and add up; spreads bursts of noise from other work over all of them")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up per scenario, to fill connection pools and statement caches")
	scen := fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios to run, in this order")
	fs.IntVar(&o.replayKeys, "replay-keys", 1000, "keys completed before the replay and 422 scenarios, and exports accepted before async-status, which cycle over them")
	fs.IntVar(&o.heldKeys, "held-keys", 4, "keys held in flight during the 409 scenario")
	fs.IntVar(&o.stormKeys, "storm-keys", 4, "keys all clients share at a time in the storm; new ones replace them after conns x storm-keys requests")
	fs.IntVar(&o.poolConns, "pool-conns", 0, "the server's PostgreSQL pool size (pool_max_conns); 0 keeps pgxpool's default, max(4, CPUs)")
	fs.DurationVar(&o.hop, "hop", 0, "put a network hop of this one-way delay (e.g. 250us) between the servers and PostgreSQL (and Redis); 0: loopback, as before")
	fs.BoolVar(&o.hopRedis, "hop-redis", true, "with -hop, put Redis behind the hop too, as a deployment's would be")
	fs.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "the Redis of the fiber and -redis scenarios (host:port, database 0); the bench deletes only its own keys: fiberpeer's under idemgen-bench:fiber:PID:, and the replay filter's entries for the run's keys")
	fs.BoolVar(&o.ownCluster, "own-cluster", false, "start a throwaway PostgreSQL cluster for the run even if one is found, so that cluster-wide counters (xids, WAL) are the run's alone; it runs with fsync=off")
	fs.DurationVar(&o.settle, "pg-settle", 11*time.Second, "how long to wait for pg_stat_database to settle when the server cannot flush it (PostgreSQL before 15); backends publish their counts within 10 s of going idle")
	fs.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of tables")
	fs.BoolVar(&o.goBench, "gobench", true, "also run go test -bench GeneratedHandler -benchmem ./example/server (allocations per request)")
	fs.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime for -gobench")
	fs.BoolVar(&o.verbose, "v", false, "copy the server's log to stderr")
	fs.BoolVar(&o.generator, "generator", false, "time idemgen generate and oapi-codegen on the largest specs instead of the load run")
	fs.StringVar(&o.specs, "specs", "", "the real specs directory with INDEX.tsv (default ../shared/specs from the module root)")
	fs.IntVar(&o.genRuns, "gen-runs", 3, "runs of each generator per spec; the median is reported")
	fs.IntVar(&o.genTop, "gen-top", 3, "how many of the largest specs idemgen accepts to time (refused ones are skipped and listed)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(f *flag.Flag) { o.scenariosSet = o.scenariosSet || f.Name == "scenarios" })
	for _, s := range strings.Split(*scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !knownScenario(s) {
			return o, fmt.Errorf("unknown scenario %q; expected some of %s", s, strings.Join(scenarioNames, ","))
		}
		o.scenarios = append(o.scenarios, s)
	}
	switch {
	case o.conns < 1 || o.rounds < 1:
		return o, errors.New("-conns and -rounds must be at least 1")
	case o.duration <= 0:
		return o, errors.New("-duration must be positive")
	case o.hop < 0:
		return o, errors.New("-hop must not be negative")
	case o.warmup < 0:
		return o, errors.New("-warmup must not be negative")
	case o.replayKeys < 1 || o.heldKeys < 1 || o.stormKeys < 1:
		return o, errors.New("-replay-keys, -held-keys and -storm-keys must be at least 1")
	case o.genRuns < 1 || o.genTop < 1:
		return o, errors.New("-gen-runs and -gen-top must be at least 1")
	case len(o.scenarios) == 0 && !o.generator:
		return o, errors.New("-scenarios names none")
	}
	return o, nil
}

func main() {
	if d, ok := os.LookupEnv(proxyEnv); ok {
		// Started by a run with -hop as its delay proxy.
		os.Exit(delayProxyMain(d, os.Args[1:]))
	}
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, opts, os.Stdout, os.Stderr, log); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run does what opts say, printing results to out and progress to prog.
func run(ctx context.Context, opts options, out, prog io.Writer, log *slog.Logger) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "idemgen-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p := progress{w: prog}
	if opts.generator {
		specs := opts.specs
		if specs == "" {
			specs = filepath.Join(root, "..", "shared", "specs")
		}
		res, err := runGenerator(ctx, p, root, tmp, specs, opts.genRuns, opts.genTop)
		if err != nil {
			return err
		}
		res.Machine = machineInfo()
		return res.write(out, opts.jsonOut)
	}
	rep, err := runLoad(ctx, opts, p, root, tmp, log)
	if err != nil {
		return err
	}
	return rep.write(out, opts.jsonOut)
}

// progress prints what the run is doing, to stderr, as it goes.
type progress struct{ w io.Writer }

func (p progress) printf(format string, args ...any) {
	fmt.Fprintf(p.w, "bench: "+format+"\n", args...)
}
