package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idemgen/idemgen/internal/pglocal"
	"github.com/jackc/pgx/v5"
)

// runLoad runs the load scenarios of opts and returns their report.
func runLoad(ctx context.Context, opts options, p progress, root, tmp string, log *slog.Logger) (*report, error) {
	rep := &report{
		Machine: machineInfo(),
		Load:    loadConfig{Conns: opts.conns, Rounds: opts.rounds, Duration: opts.duration.String(), Warmup: opts.warmup.String(), PoolConns: opts.poolConns},
	}
	if opts.goBench {
		// First, while nothing else of the run uses the CPUs.
		p.printf("%s", goBenchCommand(opts.benchtime))
		var err error
		if rep.GoBench, err = runGoBench(ctx, root, opts.benchtime); err != nil {
			return nil, err
		}
		rep.GoBenchCommand = goBenchCommand(opts.benchtime)
	}

	admin := opts.adminURL
	throwaway := false
	if admin == "" {
		pg, err := pglocal.Start(ctx, pglocal.Options{Logger: log, ForceCluster: opts.ownCluster})
		if err != nil {
			return nil, err
		}
		defer pg.Close()
		admin, throwaway = pg.URL, pg.Started
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	mon := &monitor{conn: conn}
	if rep.PG, err = mon.settings(ctx); err != nil {
		return nil, err
	}
	rep.PG.Throwaway = throwaway
	if mon.dbName, err = createDatabase(ctx, conn); err != nil {
		return nil, err
	}
	defer func() {
		// Also after an interrupt: a fresh context.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropDatabase(ctx, conn, mon.dbName); err != nil {
			p.printf("%v", err)
		}
	}()
	where := "on another machine"
	if mon.local {
		where = "on this machine"
	}
	p.printf("PostgreSQL %s %s (fsync=%s, synchronous_commit=%s), database %s", rep.PG.Version, where, rep.PG.Fsync, rep.PG.SynchronousCommit, mon.dbName)
	dbURL, err := withDatabase(admin, mon.dbName, opts.poolConns)
	if err != nil {
		return nil, err
	}

	f := &fixtures{p: p, dbURL: dbURL, runID: strings.TrimPrefix(mon.dbName, "idemgen_bench_"), conns: opts.conns, replayKeys: opts.replayKeys, heldKeys: opts.heldKeys, stormKeys: opts.stormKeys}
	var scenarios []*scenario
	for _, name := range opts.scenarios {
		sc := f.scenario(name)
		if sc.server == "" {
			sc.server = backendOrders
		}
		scenarios = append(scenarios, sc)
	}
	if scenarios, err = needRedis(ctx, opts, p, scenarios); err != nil {
		return nil, err
	}
	if len(scenarios) == 0 {
		return nil, errors.New("no scenario left to run")
	}
	usesRedis := slices.ContainsFunc(scenarios, func(sc *scenario) bool { return needsRedis(sc.server) })
	if slices.ContainsFunc(scenarios, func(sc *scenario) bool { return sc.server == backendOrdersRedis }) {
		defer func() {
			// The replay filter's entries for the run's keys, and no
			// others; after the servers stopped.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := redisUnlink(ctx, opts.redisAddr, f.redisFilterKeys()); err != nil {
				p.printf("delete the replay filter's entries from Redis: %v", err)
			}
		}()
	}

	// The servers' way to their data stores: direct, or across the hop.
	env := backendEnv{root: root, tmp: tmp, dbURL: dbURL, redisAddr: opts.redisAddr, conns: opts.conns, p: p}
	rep.Hop = hopInfo{Mode: "none"}
	var hopPID int
	if opts.hop > 0 {
		hop, err := setUpHop(ctx, opts, p, admin, usesRedis, &env, &rep.Hop)
		if err != nil {
			return nil, err
		}
		defer hop.stop()
		hopPID = hop.pid()
	}

	p.printf("building example/cmd/orders-api")
	if env.ordersBin, err = goBuild(ctx, root, tmp, "orders-api", "./example/cmd/orders-api"); err != nil {
		return nil, err
	}
	if opts.verbose {
		env.logTo = os.Stderr
	}
	l := &loadRun{opts: opts, p: p, mon: mon, env: env, backends: map[string]*backend{}, hopPID: hopPID}
	defer l.stopBackends()
	if usesRedis {
		l.redisPID = findRedis(opts.redisAddr)
	}
	// The orders-api first: its migrations make the tables all use.
	orders, err := l.backend(ctx, backendOrders)
	if err != nil {
		return nil, err
	}
	f.clients = orders.clients
	f.backend = func(name string) *backend { return l.backends[name] }
	// Rounds interleave the scenarios, so that a burst of noise from
	// other work on the machine is spread over all of them.
	rep.Scenarios = make([]scenarioResult, len(scenarios))
	per := opts.duration / time.Duration(opts.rounds)
	for round := range opts.rounds {
		if opts.rounds > 1 {
			p.printf("round %d of %d", round+1, opts.rounds)
		}
		for i, sc := range scenarios {
			res, err := l.measure(ctx, sc, per)
			if err != nil {
				if b := l.backends[sc.server]; b != nil {
					return nil, fmt.Errorf("%s: %w\n%s log:\n%s", sc.name, err, b.name, b.srv.tail())
				}
				return nil, fmt.Errorf("%s: %w", sc.name, err)
			}
			if round == 0 {
				rep.Scenarios[i] = res
			} else {
				rep.Scenarios[i].add(res)
			}
		}
	}
	rep.PoolSeen = l.poolSeen
	if opts.bigBodies > 0 {
		// Last, each on a server of its own, so that neither the
		// scenarios' memory nor the other measurement's weighs on it.
		var m [2]memoryResult
		for i, path := range []string{memoryPath, memoryBaselinePath} {
			p.printf("memory: %d bodies of %d MiB at once to %s", opts.bigBodies, opts.bodyMiB, path)
			if m[i], err = measureFresh(ctx, env.ordersBin, env.dbURL, env.logTo, path, opts.bigBodies, int64(opts.bodyMiB)<<20); err != nil {
				return nil, fmt.Errorf("memory: %w", err)
			}
			p.printf("memory: %.2fx the bodies' total over the idle server", m[i].Ratio)
		}
		m[0].Baseline = &m[1]
		rep.Memory = &m[0]
	}
	rep.finish()
	return rep, nil
}

// needRedis drops the scenarios that need Redis when it does not answer,
// unless they were asked for by name.
func needRedis(ctx context.Context, opts options, p progress, scenarios []*scenario) ([]*scenario, error) {
	if !slices.ContainsFunc(scenarios, func(sc *scenario) bool { return needsRedis(sc.server) }) {
		return scenarios, nil
	}
	err := redisUp(ctx, opts.redisAddr)
	if err == nil {
		return scenarios, nil
	}
	if opts.scenariosSet {
		return nil, fmt.Errorf("the scenarios on Redis need one at %s (-redis): %w", opts.redisAddr, err)
	}
	p.printf("skipping the scenarios that need Redis: none answers at %s (%v)", opts.redisAddr, err)
	return slices.DeleteFunc(scenarios, func(sc *scenario) bool { return needsRedis(sc.server) }), nil
}

// setUpHop starts the delay proxy in front of PostgreSQL (and Redis),
// points env's servers at it and measures the round trips, into info.
func setUpHop(ctx context.Context, opts options, p progress, admin string, usesRedis bool, env *backendEnv, info *hopInfo) (*hopProxy, error) {
	pg, err := pgTarget(admin)
	if err != nil {
		return nil, err
	}
	targets := []string{pg}
	redis := usesRedis && opts.hopRedis
	if redis {
		targets = append(targets, "tcp:"+opts.redisAddr)
	}
	hop, err := startHop(ctx, opts.hop, targets)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			hop.stop()
		}
	}()
	if env.dbURL, err = viaHop(env.dbURL, hop.addrs[0]); err != nil {
		return nil, err
	}
	stores := "PostgreSQL"
	if redis {
		stores = "PostgreSQL and Redis"
	}
	*info = hopInfo{Mode: "proxy", Delay: opts.hop.String(), OneWayMS: ms(opts.hop), Redis: redis, Netem: netemNote(),
		Note: "a delay proxy (a child process of the bench) holds each chunk the delay in each direction between the servers and " +
			stores + "; the clients reach the servers over loopback; the proxy's CPU time is hop µs"}
	adminViaHop, err := viaHop(admin, hop.addrs[0])
	if err != nil {
		return nil, err
	}
	// Both on connections of their own, outside the servers' pools.
	direct, err := pgRTTer(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL round trip: %w", err)
	}
	defer direct.close()
	across, err := pgRTTer(ctx, adminViaHop)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL round trip across the hop: %w", err)
	}
	defer across.close()
	d, err := direct.rtt()
	if err != nil {
		return nil, err
	}
	lead, via, err := hop.calibrate(opts.hop, d, across.rtt)
	if err != nil {
		return nil, fmt.Errorf("calibrate the hop: %w", err)
	}
	info.PGRTTDirectMS, info.PGRTTMS, info.LeadUS = ms(d), ms(via), float64(lead)/float64(time.Microsecond)
	p.printf("hop: %v each way by a delay proxy (written %v early for its own latency); SELECT 1 takes %.3f ms across it, %.3f ms direct",
		opts.hop, lead, info.PGRTTMS, info.PGRTTDirectMS)
	if redis {
		env.redisAddr = hop.addrs[1]
		for _, m := range []struct {
			addr string
			into *float64
		}{{opts.redisAddr, &info.RedisRTTDirectMS}, {env.redisAddr, &info.RedisRTTMS}} {
			d, err := redisRTT(ctx, m.addr)
			if err != nil {
				return nil, fmt.Errorf("Redis round trip to %s: %w", m.addr, err)
			}
			*m.into = ms(d)
		}
		p.printf("hop: Redis PING takes %.3f ms across it, %.3f ms direct", info.RedisRTTMS, info.RedisRTTDirectMS)
	}
	ok = true
	return hop, nil
}

// measureFresh runs measureMemory on a server started for it.
func measureFresh(ctx context.Context, bin, dbURL string, logTo io.Writer, path string, n int, size int64) (memoryResult, error) {
	srv, err := startServer(ctx, bin, dbURL, logTo)
	if err != nil {
		return memoryResult{}, err
	}
	defer srv.stop()
	m, err := measureMemory(ctx, srv, path, n, size)
	if err != nil {
		return m, fmt.Errorf("%s: %w\nserver log:\n%s", path, err, srv.tail())
	}
	return m, nil
}

// loadRun drives the server and reads its counters around each scenario.
type loadRun struct {
	opts options
	p    progress
	mon  *monitor
	env  backendEnv
	// backends are the servers started so far, by name.
	backends map[string]*backend
	// hopPID and redisPID are the delay proxy's and Redis's processes,
	// whose CPU time is sampled when known (not 0).
	hopPID, redisPID int
	// noFlush is set once the server could not flush PostgreSQL's
	// statistics; the run then waits for them.
	noFlush  bool
	poolSeen int
}

// backend returns the backend name, started on first use.
func (l *loadRun) backend(ctx context.Context, name string) (*backend, error) {
	if b, ok := l.backends[name]; ok {
		return b, nil
	}
	b, err := startBackend(ctx, l.env, name)
	if err != nil {
		return nil, err
	}
	l.backends[name] = b
	return b, nil
}

func (l *loadRun) stopBackends() {
	for _, b := range l.backends {
		b.stop()
	}
}

// dbStats reads the statement counts of every backend: the requests of
// b, and as background what all others sent (their own background, and
// the requests of backends idle meanwhile), which pg_stat_database
// counts too.
func (l *loadRun) dbStats(ctx context.Context, b *backend, flush bool) (dbStats, error) {
	out := dbStats{Requests: dbCounts{Statements: map[string]int64{}}, Background: dbCounts{Statements: map[string]int64{}}}
	for name, o := range l.backends {
		s, err := o.srv.dbStats(ctx, flush)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		if o == b {
			out.Requests = s.Requests
		} else {
			out.Background = out.Background.plus(s.Requests)
		}
		out.Background = out.Background.plus(s.Background)
	}
	return out, nil
}

// reading is what is read at once, right before and right after a
// measurement, while no request runs.
type reading struct {
	stats   dbStats
	pos     position
	cpu     cpuSample
	clients int
}

func (l *loadRun) read(ctx context.Context, b *backend) (reading, error) {
	var r reading
	var err error
	if r.stats, err = l.dbStats(ctx, b, false); err != nil {
		return r, err
	}
	if r.pos, err = l.mon.position(ctx); err != nil {
		return r, err
	}
	var pids []int
	if l.mon.local {
		if pids, r.clients, err = l.mon.pids(ctx, appName(b.name)); err != nil {
			return r, err
		}
	}
	redis := 0
	if needsRedis(b.name) {
		redis = l.redisPID
	}
	r.cpu = sampleCPU(b.srv.pid(), pids, l.hopPID, redis)
	r.cpu.pgOK = l.mon.local
	return r, nil
}

// settledXact reads pg_stat_database once the run's connections have
// published their counts, with the server's statement counts at that
// moment. A PostgreSQL backend publishes at most once a second while busy
// and, once idle, within 10 s; the server's flush endpoint makes its idle
// connections publish at once (PostgreSQL 15 and later). Without it, this
// waits -pg-settle. Either way two reads 100 ms apart must then agree.
func (l *loadRun) settledXact(ctx context.Context, b *backend) (xactCounts, dbStats, bool, error) {
	var stats dbStats
	var err error
	if !l.noFlush {
		if stats, err = l.dbStats(ctx, b, true); err != nil {
			l.noFlush = true
			l.p.printf("the server cannot flush PostgreSQL's statistics (%v); waiting %v for them instead", err, l.opts.settle)
		}
	}
	if l.noFlush {
		if err := sleep(ctx, l.opts.settle); err != nil {
			return xactCounts{}, stats, false, err
		}
		if stats, err = l.dbStats(ctx, b, false); err != nil {
			return xactCounts{}, stats, false, err
		}
	}
	prev, err := l.mon.xact(ctx)
	if err != nil {
		return prev, stats, false, err
	}
	for range 50 {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return prev, stats, false, err
		}
		cur, err := l.mon.xact(ctx)
		if err != nil {
			return cur, stats, false, err
		}
		if cur.Commits == prev.Commits && cur.Rollbacks == prev.Rollbacks {
			return cur, stats, true, nil
		}
		prev = cur
	}
	return prev, stats, false, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measure runs one scenario: its preparation, a warm-up, then the
// measured run between two readings of every counter.
func (l *loadRun) measure(ctx context.Context, sc *scenario, d time.Duration) (res scenarioResult, err error) {
	if sc.cleanup != nil {
		defer func() {
			if cerr := sc.cleanup(context.WithoutCancel(ctx)); cerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
			}
		}()
	}
	b, err := l.backend(ctx, sc.server)
	if err != nil {
		return res, err
	}
	if sc.prepare != nil {
		l.p.printf("%s: preparing", sc.name)
		if err := sc.prepare(ctx); err != nil {
			return res, fmt.Errorf("prepare: %w", err)
		}
	}
	if l.opts.warmup > 0 {
		l.p.printf("%s: warm-up %v", sc.name, l.opts.warmup)
		w := drive(ctx, b.clients, l.opts.warmup, sc.next)
		if n := unexpected(w, sc.expect); n > 0 {
			l.p.printf("%s: warm-up: %d of %d answers unexpected, e.g. %s", sc.name, n, w.requests, w.sample)
		}
	}
	x0, bg0, settled0, err := l.settledXact(ctx, b)
	if err != nil {
		return res, err
	}
	r0, err := l.read(ctx, b)
	if err != nil {
		return res, err
	}
	l.p.printf("%s: %v ...", sc.name, d)
	ph := drive(ctx, b.clients, d, sc.next)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	r1, err := l.read(ctx, b)
	if err != nil {
		return res, err
	}
	x1, bg1, settled1, err := l.settledXact(ctx, b)
	if err != nil {
		return res, err
	}
	if sc.server == backendOrders {
		l.poolSeen = max(l.poolSeen, r1.clients)
	}
	res = summarize(sc, ph, r0, r1)
	// What the server's background did (the janitor, the flushes) is in
	// pg_stat_database too: take it out, as the tracer counted it.
	bg := bg1.Background.minus(bg0.Background)
	res.PGCommits = x1.Commits - x0.Commits - (bg.transactions() - bg.Rollbacks)
	res.PGRollbacks = x1.Rollbacks - x0.Rollbacks - bg.Rollbacks
	res.PGRows = x1.Rows - x0.Rows
	res.PGSettled = settled0 && settled1
	res.OtherDBTransactions = x1.Others - x0.Others
	l.p.printf("%s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, %d errors", sc.name, res.RPS, res.P50ms, res.P99ms, res.Errors)
	if res.Errors > 0 {
		l.p.printf("%s: e.g. %s", sc.name, res.ErrorSample)
	}
	return res, nil
}

// unexpected counts the answers of p that are not among expect.
func unexpected(p phase, expect []outcome) int64 {
	n := p.requests
	for _, o := range expect {
		n -= p.outcomes[o]
	}
	return n
}

// summarize turns a measured phase and the readings around it into the
// scenario's row.
func summarize(sc *scenario, ph phase, r0, r1 reading) scenarioResult {
	bg := r1.stats.Background.minus(r0.stats.Background)
	res := scenarioResult{
		Name:             sc.name,
		About:            sc.about,
		Requests:         ph.requests,
		Seconds:          ph.elapsed.Seconds(),
		Errors:           unexpected(ph, sc.expect),
		Outcomes:         map[string]int64{},
		DB:               r1.stats.Requests.minus(r0.stats.Requests),
		Background:       bg.statements(),
		XIDs:             int64(r1.pos.NextXID - r0.pos.NextXID),
		WALBytes:         int64(r1.pos.WAL - r0.pos.WAL),
		DatabasesChanged: r1.pos.Databases != r0.pos.Databases,
		CPU:              r1.cpu.since(r0.cpu),
		PGConns:          r1.clients,
		ErrorSample:      ph.sample,
		latencies:        ph.latencies,
	}
	// Transaction IDs the server's transactions cannot account for: other
	// databases, autovacuum. A writing commit takes one, a rollback may
	// (a claim that lost a race may have locked a row first). Below zero
	// means no sign of others.
	ours := res.DB.writingCommits() + res.DB.Rollbacks + bg.writingCommits() + bg.Rollbacks
	res.ForeignXIDs = max(0, res.XIDs-ours)
	for o, n := range ph.outcomes {
		if n > 0 {
			res.Outcomes[outcome(o).String()] = n
		}
	}
	res.compute()
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
