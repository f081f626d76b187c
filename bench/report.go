package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// report is the result of a load run.
type report struct {
	Machine        machine          `json:"machine"`
	PG             pgSettings       `json:"postgres"`
	Load           loadConfig       `json:"load"`
	Hop            hopInfo          `json:"hop"`
	PoolSeen       int              `json:"server_pg_connections"`
	Scenarios      []scenarioResult `json:"scenarios"`
	Targets        []target         `json:"targets"`
	Memory         *memoryResult    `json:"memory,omitempty"`
	GoBench        []goBenchResult  `json:"go_bench,omitempty"`
	GoBenchCommand string           `json:"go_bench_command,omitempty"`
}

type loadConfig struct {
	Conns     int    `json:"conns"`
	Rounds    int    `json:"rounds"`
	Duration  string `json:"duration"`
	Warmup    string `json:"warmup"`
	PoolConns int    `json:"pool_conns_flag"`
}

// scenarioResult is one scenario's measured run.
type scenarioResult struct {
	Name     string           `json:"name"`
	About    string           `json:"about"`
	Requests int64            `json:"requests"`
	Seconds  float64          `json:"seconds"`
	RPS      float64          `json:"requests_per_second"`
	Ratio    float64          `json:"ratio_to_baseline"` // 0 without a baseline
	P50ms    float64          `json:"p50_ms"`
	P99ms    float64          `json:"p99_ms"`
	Errors   int64            `json:"errors"`
	Outcomes map[string]int64 `json:"outcomes"`
	// DB is what the server's tracer counted for the requests.
	DB dbCounts `json:"statements"`
	// Background counts the server's other statements meanwhile (the
	// janitor), left out of DB.
	Background int64 `json:"background_statements"`
	// PGCommits and PGRollbacks are pg_stat_database's deltas for the
	// run's database, less the server's background transactions.
	PGCommits   int64 `json:"pg_xact_commit"`
	PGRollbacks int64 `json:"pg_xact_rollback"`
	// PGRows are the rows inserted, updated or deleted in the run's
	// database.
	PGRows    int64 `json:"pg_rows_written"`
	PGSettled bool  `json:"pg_stats_settled"`
	// XIDs and WALBytes are cluster-wide: they include what other
	// databases and autovacuum did meanwhile. ForeignXIDs are the
	// transaction IDs the server's writing commits do not account for;
	// OtherDBTransactions and DatabasesChanged tell of other clients.
	XIDs                int64  `json:"xids_assigned"`
	WALBytes            int64  `json:"wal_bytes"`
	ForeignXIDs         int64  `json:"xids_not_from_the_server"`
	OtherDBTransactions int64  `json:"other_databases_transactions"`
	DatabasesChanged    bool   `json:"databases_created_or_dropped"`
	CPU                 cpuUse `json:"cpu"`
	PGConns             int    `json:"pg_client_connections"`
	ErrorSample         string `json:"error_sample,omitempty"`

	latencies []time.Duration // sorted
}

// compute derives the rates and percentiles from the counts.
func (s *scenarioResult) compute() {
	s.RPS = 0
	if s.Seconds > 0 {
		s.RPS = float64(s.Requests) / s.Seconds
	}
	s.P50ms = ms(percentile(s.latencies, 50))
	s.P99ms = ms(percentile(s.latencies, 99))
}

// quiet reports whether nothing but this run used the cluster, as far as
// can be seen, so that its xids and WAL are the run's own.
func (s *scenarioResult) quiet() bool {
	return s.ForeignXIDs == 0 && s.OtherDBTransactions == 0 && !s.DatabasesChanged
}

// add merges o, a later round of the same scenario, into s.
func (s *scenarioResult) add(o scenarioResult) {
	s.Requests += o.Requests
	s.Seconds += o.Seconds
	s.Errors += o.Errors
	for k, v := range o.Outcomes {
		s.Outcomes[k] += v
	}
	s.DB = s.DB.plus(o.DB)
	s.Background += o.Background
	s.PGCommits += o.PGCommits
	s.PGRollbacks += o.PGRollbacks
	s.PGRows += o.PGRows
	s.PGSettled = s.PGSettled && o.PGSettled
	s.XIDs += o.XIDs
	s.WALBytes += o.WALBytes
	s.ForeignXIDs += o.ForeignXIDs
	s.OtherDBTransactions += o.OtherDBTransactions
	s.DatabasesChanged = s.DatabasesChanged || o.DatabasesChanged
	s.CPU = s.CPU.plus(o.CPU, s.Seconds-o.Seconds, o.Seconds)
	s.PGConns = max(s.PGConns, o.PGConns)
	if s.ErrorSample == "" {
		s.ErrorSample = o.ErrorSample
	}
	s.latencies = append(s.latencies, o.latencies...)
	slices.Sort(s.latencies)
	s.compute()
}

// per divides n by the scenario's requests.
func (s scenarioResult) per(n int64) float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(n) / float64(s.Requests)
}

// perUS is d per request, in microseconds.
func (s scenarioResult) perUS(d time.Duration) float64 {
	return s.per(int64(d)) / float64(time.Microsecond)
}

// target is one of the targets and whether this run met it.
type target struct {
	Name   string `json:"name"`
	Status string `json:"status"` // met, missed or not measured
	Detail string `json:"detail"`
}

func (r *report) scenario(name string) *scenarioResult {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i]
		}
	}
	return nil
}

// finish computes the ratios to the baseline and checks the targets.
func (r *report) finish() {
	if base := r.scenario("baseline"); base != nil && base.RPS > 0 {
		for i := range r.Scenarios {
			r.Scenarios[i].Ratio = r.Scenarios[i].RPS / base.RPS
		}
	}
	r.Targets = checkTargets(r)
}

func checkTargets(r *report) []target {
	base := r.scenario("baseline")
	ratio := func(name, scen string, want float64) target {
		t := target{Name: name, Status: "not measured", Detail: "needs the baseline and " + scen + " scenarios"}
		s := r.scenario(scen)
		if base == nil || s == nil {
			return t
		}
		t.Status = metOrMissed(s.Ratio >= want)
		t.Detail = fmt.Sprintf("%.2fx (%.0f vs %.0f req/s)", s.Ratio, s.RPS, base.RPS)
		return t
	}
	ts := []target{
		ratio("atomic first execution at 0.58x the baseline's req/s or better", "atomic-first", 0.58),
	}
	// PostgreSQL's CPU is what does not scale out with the servers.
	pgCPU := target{Name: "atomic first execution costs PostgreSQL at most 1.6x the baseline's CPU per request", Status: "not measured", Detail: "needs the baseline and atomic-first scenarios, and PostgreSQL's CPU"}
	if s := r.scenario("atomic-first"); s != nil && base != nil && s.CPU.PGOK && base.CPU.PGOK && base.perUS(base.CPU.PG) > 0 {
		ours, theirs := s.perUS(s.CPU.PG), base.perUS(base.CPU.PG)
		pgCPU.Status = metOrMissed(ours <= 1.6*theirs)
		pgCPU.Detail = fmt.Sprintf("%.2fx (%.0f vs %.0f µs per request)", ours/theirs, ours, theirs)
	}
	ts = append(ts, pgCPU)
	floor := target{Name: "replay at 0.9x read-by-id's req/s or better", Status: "not measured", Detail: "needs the replay and read-by-id scenarios"}
	if replay, read := r.scenario("replay"), r.scenario("read-by-id"); replay != nil && read != nil && read.RPS > 0 {
		floor.Status = metOrMissed(replay.RPS >= 0.9*read.RPS)
		floor.Detail = fmt.Sprintf("%.2fx (%.0f vs %.0f req/s)", replay.RPS/read.RPS, replay.RPS, read.RPS)
	}
	ts = append(ts, floor)
	ts = append(ts, func() target {
		t := target{Name: "realistic first execution at 0.80x the realistic baseline's req/s or better", Status: "not measured", Detail: "needs the realistic-baseline and realistic-first scenarios"}
		b, f := r.scenario("realistic-baseline"), r.scenario("realistic-first")
		if b == nil || f == nil || b.RPS == 0 {
			return t
		}
		t.Status = metOrMissed(f.RPS >= 0.80*b.RPS)
		t.Detail = fmt.Sprintf("%.2fx (%.0f vs %.0f req/s)", f.RPS/b.RPS, f.RPS, b.RPS)
		return t
	}())
	trips := target{Name: "atomic first execution makes at most 2 protocol round trips besides the handler's", Status: "not measured", Detail: "needs the baseline and atomic-first scenarios"}
	if s := r.scenario("atomic-first"); s != nil && base != nil && base.Requests > 0 && s.Requests > 0 {
		// The baseline's round trips are the handler's own.
		extra := s.per(s.DB.RoundTrips) - base.per(base.DB.RoundTrips)
		trips.Status = metOrMissed(extra <= 2.005)
		trips.Detail = fmt.Sprintf("%.2f round trips besides the handler's %.2f", extra, base.per(base.DB.RoundTrips))
	}
	ts = append(ts, trips)
	// Side by side with the designs teams write by hand (bench/peers).
	vsPeer := func(name, ours string, want float64, peerNames ...string) target {
		t := target{Name: name, Status: "not measured", Detail: "needs " + ours + " and " + strings.Join(peerNames, ", ")}
		s := r.scenario(ours)
		var best *scenarioResult
		for _, p := range peerNames {
			if ps := r.scenario(p); ps != nil && (best == nil || ps.RPS > best.RPS) {
				best = ps
			}
		}
		if s == nil || best == nil || best.RPS == 0 {
			return t
		}
		t.Status = metOrMissed(s.RPS >= want*best.RPS)
		t.Detail = fmt.Sprintf("%.2fx the faster, %s (%.0f vs %.0f req/s)", s.RPS/best.RPS, best.Name, s.RPS, best.RPS)
		return t
	}
	ts = append(ts,
		vsPeer("atomic first execution at 1.5x the faster hand-written design's or better", "atomic-first", 1.5, "peer-insert-update", "peer-upsert"),
		vsPeer("replay at 1.5x the faster hand-written design's replay or better", "replay", 1.5, "peer-insert-update-replay", "peer-upsert-replay"),
		vsPeer("replay with the Redis filter at 1.5x read-by-id's req/s or better", "replay-redis", 1.5, "read-by-id"),
		vsPeer("replay with the Redis filter at Fiber's replay or better", "replay-redis", 1, "fiber-replay"),
		vsPeer("first execution with the Redis filter at most 5% slower than without", "atomic-first-redis", 0.95, "atomic-first"))

	// No commit that writes: the server sent none (the tracer), and
	// PostgreSQL wrote no row in the run's database. Transaction IDs and
	// WAL are cluster-wide, so they are shown, with what others did.
	noWrite := target{Name: "replay, 409 and 422 make no commit that writes", Status: "not measured", Detail: "needs the replay, 409 and 422 scenarios"}
	var details []string
	met, measured := true, 0
	for _, name := range []string{"replay", "409", "422"} {
		s := r.scenario(name)
		if s == nil {
			continue
		}
		measured++
		met = met && s.DB.writingCommits() == 0 && s.PGRows == 0
		d := fmt.Sprintf("%s: %d writing commits (tracer) and %d rows written (pg_stat_database) in %d requests; cluster-wide %d transaction IDs, %d WAL bytes",
			name, s.DB.writingCommits(), s.PGRows, s.Requests, s.XIDs, s.WALBytes)
		if !s.quiet() {
			d += " (" + s.others() + ")"
		}
		details = append(details, d)
	}
	if measured == 3 {
		noWrite.Status = metOrMissed(met)
	}
	if measured > 0 {
		noWrite.Detail = strings.Join(details, "; ")
	}
	ts = append(ts, noWrite)

	one := target{Name: "atomic first execution makes one commit", Status: "not measured", Detail: "needs the atomic-first scenario"}
	if s := r.scenario("atomic-first"); s != nil {
		one.Status = metOrMissed(s.Requests > 0 && s.DB.writingCommits() == s.Requests && s.DB.Rollbacks == 0 && s.Errors == 0)
		one.Detail = fmt.Sprintf("%d writing commits for %d requests (tracer), %.3f transaction IDs and %.3f pg_stat_database commits per request",
			s.DB.writingCommits(), s.Requests, s.per(s.XIDs), s.per(s.PGCommits))
	}
	ts = append(ts, one)
	ts = append(ts, asyncTargets(r)...)
	mem := target{Name: "peak resident memory under concurrent maximum-size bodies at most 1.3x their total over the idle server", Status: "not measured", Detail: "run with -big-bodies"}
	if m := r.Memory; m != nil {
		mem.Status = metOrMissed(m.Ratio <= 1.3)
		mem.Detail = fmt.Sprintf("%.2fx: %d bodies of %.0f MiB, %.0f MiB in all; %.0f MiB idle, %.0f MiB at the peak",
			m.Ratio, m.Bodies, mib(m.BodyBytes), mib(int64(m.Bodies)*m.BodyBytes), mib(m.IdleRSS), mib(m.PeakRSS))
		if b := m.Baseline; b != nil {
			mem.Detail += fmt.Sprintf("; the same bodies to the unannotated %s: %.2fx, so the layer's own share is %+.2fx", b.Path, b.Ratio, m.Ratio-b.Ratio)
		}
	}
	return append(ts, mem)
}

// asyncTargets are the targets of an async operation (docs/ASYNC.md):
// accepting costs a fixed three round trips and one commit, and answers no
// slower than a first execution that runs its handler in the request; a
// status read is one statement.
func asyncTargets(r *report) []target {
	fast := target{Name: "accepting an async request answers at least as fast as an atomic first execution (req/s and p50)", Status: "not measured", Detail: "needs the async-accept and atomic-first scenarios"}
	if a, f := r.scenario("async-accept"), r.scenario("atomic-first"); a != nil && f != nil && f.RPS > 0 {
		fast.Status = metOrMissed(a.RPS >= f.RPS && a.P50ms <= f.P50ms)
		fast.Detail = fmt.Sprintf("%.2fx the req/s (%.0f vs %.0f), p50 %.2f vs %.2f ms", a.RPS/f.RPS, a.RPS, f.RPS, a.P50ms, f.P50ms)
	}
	accept := target{Name: "accepting an async request makes 3 round trips and one commit, River's insert notifications aside", Status: "not measured", Detail: "needs the async-accept scenario"}
	if a := r.scenario("async-accept"); a != nil && a.Requests > 0 {
		// River notifies its workers of inserts in some requests, in a
		// round trip of its own, limited per queue: 10 to 25 a second on
		// the machine of docs/PERFORMANCE.md; 30 a second is the bound.
		river := 3*int64(math.Ceil(a.Seconds*10)) + 1
		extra := a.DB.RoundTrips - 3*a.Requests
		accept.Status = metOrMissed(extra <= river && a.DB.writingCommits() == a.Requests && a.DB.Rollbacks == 0 && a.Errors == 0)
		accept.Detail = fmt.Sprintf("%.2f round trips and %.2f writing commits per request (%d round trips over 3 per request in %d requests, River's notifications at most %d)",
			a.per(a.DB.RoundTrips), a.per(a.DB.writingCommits()), extra, a.Requests, river)
	}
	status := target{Name: "an async request's status read is one read-only statement", Status: "not measured", Detail: "needs the async-status scenario"}
	if s := r.scenario("async-status"); s != nil && s.Requests > 0 {
		status.Status = metOrMissed(s.DB.statements() == s.Requests && s.DB.RoundTrips == s.Requests && s.DB.writingCommits() == 0 && s.Errors == 0)
		status.Detail = fmt.Sprintf("%.2f statements and %.2f writing commits per request", s.per(s.DB.statements()), s.per(s.DB.writingCommits()))
	}
	return []target{fast, accept, status}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "machine:  %s, %d cores, %s RAM, %s (kernel %s), %s\n", m.CPU, m.Cores, m.Memory, m.OS, m.Kernel, m.Go)
	pg := r.PG
	cluster := ""
	if pg.Throwaway {
		cluster = ", a throwaway cluster started for the run"
	}
	fmt.Fprintf(&b, "postgres: %s%s; fsync=%s, synchronous_commit=%s, full_page_writes=%s, wal_sync_method=%s, shared_buffers=%s\n",
		pg.Version, cluster, pg.Fsync, pg.SynchronousCommit, pg.FullPageWrites, pg.WalSyncMethod, pg.SharedBuffers)
	pool := "pgxpool's default"
	if r.Load.PoolConns > 0 {
		pool = fmt.Sprintf("pool_max_conns=%d", r.Load.PoolConns)
	}
	rounds := ""
	if r.Load.Rounds > 1 {
		rounds = fmt.Sprintf(" in %d interleaved rounds", r.Load.Rounds)
	}
	fmt.Fprintf(&b, "load:     %d client connections in a closed loop over loopback; per scenario %s measured%s, each after a %s warm-up;\n          the server's pool: %d connections to PostgreSQL (%s)\n",
		r.Load.Conns, r.Load.Duration, rounds, r.Load.Warmup, r.PoolSeen, pool)
	b.WriteString(r.Hop.line())
	b.WriteString("\n")

	header := []string{"scenario", "requests", "req/s", "x base", "p50 ms", "p99 ms", "errors",
		"stmts/req", "rt/req", "commits/req", "pg xact/req", "xids/req", "WAL B/req", "bench µs", "server µs", "pg µs", "busy"}
	// Columns that only some runs have.
	hopCol := slices.ContainsFunc(r.Scenarios, func(s scenarioResult) bool { return s.CPU.HopOK })
	redisCol := slices.ContainsFunc(r.Scenarios, func(s scenarioResult) bool { return s.CPU.RedisOK })
	if hopCol {
		header = append(header, "hop µs")
	}
	if redisCol {
		header = append(header, "redis µs")
	}
	var rows [][]string
	for _, s := range r.Scenarios {
		ratio := "-"
		if s.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", s.Ratio)
		}
		mark := ""
		if !s.quiet() {
			mark = "*"
		}
		pgXact := fmt.Sprintf("%.2f", s.per(s.PGCommits+s.PGRollbacks))
		if !s.PGSettled {
			pgXact += "?"
		}
		benchUS, serverUS, pgUS, busy := fmt.Sprintf("%.0f", s.perUS(s.CPU.Self)), "n/a", "n/a", "n/a"
		if s.CPU.OK {
			serverUS, busy = fmt.Sprintf("%.0f", s.perUS(s.CPU.Server)), fmt.Sprintf("%.0f%%", 100*s.CPU.Busy)
		}
		if s.CPU.PGOK {
			pgUS = fmt.Sprintf("%.0f", s.perUS(s.CPU.PG))
		}
		rows = append(rows, []string{
			s.Name, fmt.Sprint(s.Requests), fmt.Sprintf("%.0f", s.RPS), ratio,
			fmt.Sprintf("%.2f", s.P50ms), fmt.Sprintf("%.2f", s.P99ms), fmt.Sprint(s.Errors),
			fmt.Sprintf("%.2f", s.per(s.DB.statements())), fmt.Sprintf("%.2f", s.per(s.DB.RoundTrips)), fmt.Sprintf("%.2f", s.per(s.DB.writingCommits())),
			pgXact, fmt.Sprintf("%.2f%s", s.per(s.XIDs), mark), fmt.Sprintf("%.0f%s", s.per(s.WALBytes), mark),
			benchUS, serverUS, pgUS, busy,
		})
		optional := func(ok bool, d time.Duration) string {
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f", s.perUS(d))
		}
		if hopCol {
			rows[len(rows)-1] = append(rows[len(rows)-1], optional(s.CPU.HopOK, s.CPU.Hop))
		}
		if redisCol {
			rows[len(rows)-1] = append(rows[len(rows)-1], optional(s.CPU.RedisOK, s.CPU.Redis))
		}
	}
	writeTable(&b, header, rows)
	b.WriteString(legend)

	b.WriteString("\nper scenario (statements per request by first keyword, answers):\n")
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "  %-13s %s\n", s.Name, s.About)
		fmt.Fprintf(&b, "  %-13s statements: %s\n", "", s.statementMix())
		fmt.Fprintf(&b, "  %-13s answers: %s\n", "", s.outcomeMix())
		fmt.Fprintf(&b, "  %-13s pg_stat_database: %.2f commits, %.2f rollbacks, %.2f rows written per request (%d ROLLBACK statements counted by the tracer)\n",
			"", s.per(s.PGCommits), s.per(s.PGRollbacks), s.per(s.PGRows), s.DB.Rollbacks)
		if !s.quiet() {
			fmt.Fprintf(&b, "  %-13s * the cluster was not the run's alone: %s\n", "", s.others())
		}
		if s.Errors > 0 {
			fmt.Fprintf(&b, "  %-13s e.g. %s\n", "", s.ErrorSample)
		}
	}

	b.WriteString("\ntargets:\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "  %-12s %s: %s\n", t.Status, t.Name, t.Detail)
	}

	if len(r.GoBench) > 0 {
		fmt.Fprintf(&b, "\nthe generated handler over the in-memory store, no network, no database (%s):\n", r.GoBenchCommand)
		writeGoBench(&b, r.GoBench)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// others says what the cluster did that the server did not.
func (s scenarioResult) others() string {
	var parts []string
	if s.ForeignXIDs != 0 {
		parts = append(parts, fmt.Sprintf("%d transaction IDs not taken by the server's commits (autovacuum, other databases)", s.ForeignXIDs))
	}
	if s.OtherDBTransactions != 0 {
		parts = append(parts, fmt.Sprintf("%d transactions in other databases", s.OtherDBTransactions))
	}
	if s.DatabasesChanged {
		parts = append(parts, "databases created or dropped")
	}
	return strings.Join(parts, ", ")
}

const legend = `
  x base: req/s over the baseline's. p50, p99: latency seen by the client.
  errors: answers other than the scenario's expected ones (201, or 409/422/replay where that is the point;
    202 for async-accept, 200 for the reads).
  stmts/req: statements the server sent to PostgreSQL per request (a pgx tracer).
  rt/req: round trips to PostgreSQL per request: statements sent together (BEGIN with a claim, a batch
    ending in COMMIT) are one.
  commits/req: commits that write: COMMIT statements plus writing statements sent outside a transaction,
    which commit on their own (the baseline's insert, a phased attempt's claim). Read-only statements
    outside a transaction are transactions too, but write nothing and wait for no WAL flush.
  pg xact/req: pg_stat_database xact_commit + xact_rollback of the run's database, all transactions,
    read-only ones included, less the server's background work ("?": the counts did not settle).
  xids/req: transaction IDs assigned (writing transactions), WAL B/req: WAL bytes written; both are
    cluster-wide ("*": others used the cluster meanwhile, see below; -own-cluster isolates them).
  µs: CPU time per request of the load generator, the server process and PostgreSQL's processes for
    the run's database; busy: share of the machine's CPU time in use during the scenario; hop µs: the
    delay proxy's (-hop), redis µs: Redis's (scenarios that use it).
`

// line is the report's line about the hop.
func (h hopInfo) line() string {
	if h.Mode != "proxy" {
		return "hop:      none: the servers reach PostgreSQL and Redis over loopback\n"
	}
	redis := ""
	if h.Redis {
		redis = fmt.Sprintf(" and Redis (PING %.3f ms, %.3f ms direct)", h.RedisRTTMS, h.RedisRTTDirectMS)
	}
	return fmt.Sprintf("hop:      %s each way by a delay proxy between the servers and PostgreSQL (SELECT 1 %.3f ms, %.3f ms direct)%s;\n          the proxy writes %.0f µs early for its own latency; the clients reach the servers over loopback.\n          %s\n",
		h.Delay, h.PGRTTMS, h.PGRTTDirectMS, redis, h.LeadUS, h.Netem)
}

// statementMix lists the statements per request, most common verbs first
// in the order a request sends them.
func (s scenarioResult) statementMix() string {
	order := []string{"select", "begin", "with", "insert", "update", "delete", "commit", "rollback"}
	var parts []string
	for _, v := range order {
		if n := s.DB.Statements[v]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", v, s.per(n)))
		}
	}
	for _, v := range slices.Sorted(maps.Keys(s.DB.Statements)) {
		if !slices.Contains(order, v) {
			parts = append(parts, fmt.Sprintf("%s %.2f", v, s.per(s.DB.Statements[v])))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (s scenarioResult) outcomeMix() string {
	var parts []string
	for _, name := range outcomeNames {
		if n := s.Outcomes[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%.1f%%)", name, n, 100*s.per(n)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writeTable writes rows under header as aligned plain text: the first
// column left-aligned, the others right-aligned.
func writeTable(w io.StringWriter, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for _, row := range append([][]string{header}, rows...) {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range append([][]string{header}, rows...) {
		var line strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			switch {
			case i == 0:
				line.WriteString(cell + pad)
			default:
				line.WriteString("  " + pad + cell)
			}
		}
		_, _ = w.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}
