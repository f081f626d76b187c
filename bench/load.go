package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
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

	p.printf("building example/cmd/orders-api")
	bin, err := goBuild(ctx, root, tmp, "orders-api", "./example/cmd/orders-api")
	if err != nil {
		return nil, err
	}
	var logTo io.Writer
	if opts.verbose {
		logTo = os.Stderr
	}
	srv, err := startServer(ctx, bin, dbURL, logTo)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	p.printf("server listening on %s", srv.url)

	l := &loadRun{opts: opts, p: p, srv: srv, mon: mon}
	for i := range opts.conns {
		l.clients = append(l.clients, newClient(i, srv.url))
	}
	defer func() {
		for _, c := range l.clients {
			c.close()
		}
	}()
	f := &fixtures{clients: l.clients, dbURL: dbURL, replayKeys: opts.replayKeys, heldKeys: opts.heldKeys, stormKeys: opts.stormKeys}
	var scenarios []*scenario
	for _, name := range opts.scenarios {
		scenarios = append(scenarios, f.scenario(name))
	}
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
				return nil, fmt.Errorf("%s: %w\nserver log:\n%s", sc.name, err, srv.tail())
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
			if m[i], err = measureFresh(ctx, bin, dbURL, logTo, path, opts.bigBodies, int64(opts.bodyMiB)<<20); err != nil {
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
	opts    options
	p       progress
	srv     *serverProc
	mon     *monitor
	clients []*client
	// noFlush is set once the server could not flush PostgreSQL's
	// statistics; the run then waits for them.
	noFlush  bool
	poolSeen int
}

// reading is what is read at once, right before and right after a
// measurement, while no request runs.
type reading struct {
	stats   dbStats
	pos     position
	cpu     cpuSample
	clients int
}

func (l *loadRun) read(ctx context.Context) (reading, error) {
	var r reading
	var err error
	if r.stats, err = l.srv.dbStats(ctx, false); err != nil {
		return r, err
	}
	if r.pos, err = l.mon.position(ctx); err != nil {
		return r, err
	}
	var pids []int
	if l.mon.local {
		if pids, r.clients, err = l.mon.pids(ctx); err != nil {
			return r, err
		}
	}
	r.cpu = sampleCPU(l.srv.pid(), pids)
	r.cpu.pgOK = l.mon.local
	return r, nil
}

// settledXact reads pg_stat_database once the run's connections have
// published their counts, with the server's statement counts at that
// moment. A PostgreSQL backend publishes at most once a second while busy
// and, once idle, within 10 s; the server's flush endpoint makes its idle
// connections publish at once (PostgreSQL 15 and later). Without it, this
// waits -pg-settle. Either way two reads 100 ms apart must then agree.
func (l *loadRun) settledXact(ctx context.Context) (xactCounts, dbStats, bool, error) {
	var stats dbStats
	var err error
	if !l.noFlush {
		if stats, err = l.srv.dbStats(ctx, true); err != nil {
			l.noFlush = true
			l.p.printf("the server cannot flush PostgreSQL's statistics (%v); waiting %v for them instead", err, l.opts.settle)
		}
	}
	if l.noFlush {
		if err := sleep(ctx, l.opts.settle); err != nil {
			return xactCounts{}, stats, false, err
		}
		if stats, err = l.srv.dbStats(ctx, false); err != nil {
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
	if sc.prepare != nil {
		l.p.printf("%s: preparing", sc.name)
		if err := sc.prepare(ctx); err != nil {
			return res, fmt.Errorf("prepare: %w", err)
		}
	}
	if l.opts.warmup > 0 {
		l.p.printf("%s: warm-up %v", sc.name, l.opts.warmup)
		w := drive(ctx, l.clients, l.opts.warmup, sc.next)
		if n := unexpected(w, sc.expect); n > 0 {
			l.p.printf("%s: warm-up: %d of %d answers unexpected, e.g. %s", sc.name, n, w.requests, w.sample)
		}
	}
	x0, bg0, settled0, err := l.settledXact(ctx)
	if err != nil {
		return res, err
	}
	r0, err := l.read(ctx)
	if err != nil {
		return res, err
	}
	l.p.printf("%s: %v ...", sc.name, d)
	ph := drive(ctx, l.clients, d, sc.next)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	r1, err := l.read(ctx)
	if err != nil {
		return res, err
	}
	x1, bg1, settled1, err := l.settledXact(ctx)
	if err != nil {
		return res, err
	}
	if sc.name != "409" { // its held keys are connections of this process
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
