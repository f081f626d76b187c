package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) {
	if d, ok := os.LookupEnv(proxyEnv); ok {
		// The test binary as the delay proxy of a test with -hop.
		os.Exit(delayProxyMain(d, os.Args[1:]))
	}
	pgtest.Main(m)
}

func TestWriteTableAligns(t *testing.T) {
	var b strings.Builder
	writeTable(&b, []string{"scenario", "req/s", "µs"}, [][]string{
		{"baseline", "3051", "7"},
		{"atomic-first", "12", "1234"},
	})
	want := "" +
		"scenario      req/s    µs\n" +
		"baseline       3051     7\n" +
		"atomic-first     12  1234\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestParseDBStats(t *testing.T) {
	body := []byte(`{"background":{"statements":{"delete":1},"commits":0,"rollbacks":0,"autocommit_writes":1,"autocommit_reads":0},
		"requests":{"statements":{"begin":2,"commit":2,"select":3,"with":2,"insert":3,"update":2},"commits":2,"rollbacks":0,"autocommit_writes":1,"autocommit_reads":3}}`)
	s, err := parseDBStats(body)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests
	if r.statements() != 14 || r.writingCommits() != 3 || r.transactions() != 6 {
		t.Errorf("statements %d, writing commits %d, transactions %d; want 14, 3, 6", r.statements(), r.writingCommits(), r.transactions())
	}
	if _, err := parseDBStats([]byte(`{}`)); err == nil {
		t.Error("a body without counts parsed")
	}
	later := r.plus(r)
	d := later.minus(r)
	if d.statements() != r.statements() || d.Statements["select"] != 3 || d.Commits != 2 || d.AutocommitReads != 3 {
		t.Errorf("(r+r)-r = %+v, want %+v", d, r)
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkGeneratedHandler/baseline-2         	  244702	      5718 ns/op	    2300 B/op	      29 allocs/op
BenchmarkGeneratedHandler/first-2            	   86530	     14818.5 ns/op	    5788 B/op	      86 allocs/op
BenchmarkGeneratedHandler/phased-first       	   43058	     51956 ns/op	    7775 B/op	     134 allocs/op
BenchmarkGeneratedHandler/replay/decode-2    	 1288206	       914.4 ns/op	     976 B/op	       9 allocs/op
PASS
`
	got := parseGoBench(out)
	want := []goBenchResult{
		{Name: "baseline", NsPerOp: 5718, BytesPerOp: 2300, AllocsPerOp: 29},
		{Name: "first", NsPerOp: 14818.5, BytesPerOp: 5788, AllocsPerOp: 86},
		{Name: "phased-first", NsPerOp: 51956, BytesPerOp: 7775, AllocsPerOp: 134},
		{Name: "replay/decode", NsPerOp: 914.4, BytesPerOp: 976, AllocsPerOp: 9},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	var b strings.Builder
	writeGoBench(&b, got)
	if !strings.Contains(b.String(), "+57 allocs") {
		t.Errorf("no difference to the baseline in\n%s", b.String())
	}
	if !strings.Contains(b.String(), "part of replay") || strings.Contains(b.String(), "-4804 ns") {
		t.Errorf("the part of a case is compared with the baseline in\n%s", b.String())
	}
}

func TestParseProcFiles(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := []byte("4242 (orders (api) x) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 130 0 0 20 0 8 0")
	if d, ok := parseProcStat(stat); !ok || d != 3800*time.Millisecond {
		t.Errorf("parseProcStat = %v, %v; want 3.8s", d, ok)
	}
	if _, ok := parseProcStat([]byte("garbage")); ok {
		t.Error("parseProcStat accepted garbage")
	}
	ticks := []byte("cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 1 2 3\n")
	busy, total, ok := parseMachineTicks(ticks)
	if !ok || busy != 160 || total != 1187 {
		t.Errorf("parseMachineTicks = %d, %d, %v; want 160, 1187", busy, total, ok)
	}
	s0 := cpuSample{server: time.Second, busy: 100, total: 200, ok: true, pgOK: true, pg: map[int]time.Duration{1: time.Second, 2: time.Second}}
	s1 := cpuSample{server: 3 * time.Second, busy: 250, total: 400, ok: true, pgOK: true, pg: map[int]time.Duration{1: 2 * time.Second, 3: time.Hour}}
	u := s1.since(s0)
	if u.Server != 2*time.Second || u.PG != time.Second || u.Busy != 0.75 || !u.OK || !u.PGOK {
		t.Errorf("since = %+v", u)
	}
}

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]uint64{"0/0": 0, "16/B374D848": 0x16_B374D848, "FFFFFFFF/FFFFFFFF": 1<<64 - 1} {
		if got, err := parseLSN(in); err != nil || got != want {
			t.Errorf("parseLSN(%q) = %x, %v; want %x", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "16", "x/1", "1/2/3"} {
		if _, err := parseLSN(bad); err == nil {
			t.Errorf("parseLSN(%q) succeeded", bad)
		}
	}
}

func TestWithDatabase(t *testing.T) {
	cases := []struct {
		admin string
		pool  int
		want  string
	}{
		{"postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable", 0, "postgres://u:p@127.0.0.1:5432/run?sslmode=disable"},
		{"postgres://u@h/postgres?sslmode=disable", 8, "postgres://u@h/run?pool_max_conns=8&sslmode=disable"},
		{"host=h user=u dbname=postgres", 8, "host=h user=u dbname=postgres dbname=run pool_max_conns=8"},
	}
	for _, c := range cases {
		if got, err := withDatabase(c.admin, "run", c.pool); err != nil || got != c.want {
			t.Errorf("withDatabase(%q, %d) = %q, %v; want %q", c.admin, c.pool, got, err, c.want)
		}
	}
}

func TestPercentileAndMedian(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(lat, 50); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(lat, 99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(nil, 99); p != 0 {
		t.Errorf("p99 of nothing = %v", p)
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		status int
		header http.Header
		want   outcome
	}{
		{201, http.Header{}, outFirst},
		{201, http.Header{"Idempotent-Replayed": {"true"}}, outReplay},
		{409, http.Header{}, outConflict},
		{422, http.Header{}, outMismatch},
		{200, http.Header{}, outRead},
		{202, http.Header{"Location": {"/exports/requests/k"}, "Retry-After": {"1"}}, outAccepted},
		{200, http.Header{"Retry-After": {"1"}}, outPending},
		{404, http.Header{}, outOther},
		{500, http.Header{}, outOther},
	}
	for _, c := range cases {
		if got := classify(c.status, c.header); got != c.want {
			t.Errorf("classify(%d, %v) = %v, want %v", c.status, c.header, got, c.want)
		}
	}
}

// Every scenario is built, expects some answer, and is described in the
// usage text and in docs/PERFORMANCE.md's table of scenarios.
func TestScenariosDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/PERFORMANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	documented, listed := map[string]bool{}, map[string]bool{}
	_, table, _ := strings.Cut(string(doc), "| scenario | what every client sends |\n|---|---|\n")
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		names, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for n := range strings.SplitSeq(names, ", ") {
			documented[n] = true
		}
	}
	for line := range strings.Lines(usage) {
		// "  name[, name]  what it sends", the names at the second column.
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue
		}
		names, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		for n := range strings.SplitSeq(names, ", ") {
			listed[n] = true
		}
	}
	f := &fixtures{conns: 16, replayKeys: 1000, heldKeys: 4, stormKeys: 4}
	seen := map[string]bool{}
	for _, name := range scenarioNames {
		if seen[name] {
			t.Errorf("%s is listed twice", name)
		}
		seen[name] = true
		sc := f.scenario(name)
		if sc.name != name || sc.about == "" || len(sc.expect) == 0 || sc.next == nil {
			t.Errorf("%s: scenario %+v", name, sc)
		}
		if !documented[name] {
			t.Errorf("%s is not in docs/PERFORMANCE.md's table of scenarios", name)
		}
		if !listed[name] {
			t.Errorf("%s is not in the usage text", name)
		}
	}
}

func TestReadIndexSortsLargestFirst(t *testing.T) {
	index := "file\tsource_repo\tpath_in_repo\tcommit\topenapi_version\tsize_bytes\toperations\n" +
		"small.yaml\tr\tp\tc\t3.0.0\t10\t1\n" +
		"big.json\tr\tp\tc\t3.1.0\t1000\t42\n"
	got, err := readIndex(strings.NewReader(index))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].file != "big.json" || got[0].operations != 42 || got[1].size != 10 {
		t.Errorf("got %+v", got)
	}
	if _, err := readIndex(strings.NewReader("file\tx\n")); err == nil {
		t.Error("an empty index was accepted")
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-conns", "4", "-scenarios", "replay, baseline"}, io.Discard)
	if err != nil || o.conns != 4 || strings.Join(o.scenarios, ",") != "replay,baseline" || o.duration != 10*time.Second {
		t.Errorf("got %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-scenarios", "nope"}, {"-conns", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

// sample is a report as a run of two scenarios would make it.
func sample() *report {
	base := scenarioResult{Name: "baseline", Requests: 1000, Seconds: 1, Outcomes: map[string]int64{"first": 1000},
		DB:        dbCounts{Statements: map[string]int64{"insert": 1000}, AutocommitWrites: 1000, RoundTrips: 1000},
		PGCommits: 1000, PGRows: 1000, PGSettled: true, XIDs: 1000, WALBytes: 400_000,
		latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	atomic := scenarioResult{Name: "atomic-first", Requests: 900, Seconds: 1, Outcomes: map[string]int64{"first": 900},
		DB:        dbCounts{Statements: map[string]int64{"select": 900, "begin": 900, "with": 900, "insert": 900, "update": 900, "commit": 900}, Commits: 900, AutocommitReads: 900, RoundTrips: 2700},
		PGCommits: 1800, PGRows: 2700, PGSettled: true, XIDs: 900, WALBytes: 1_000_000,
		latencies: []time.Duration{3 * time.Millisecond}}
	replay := scenarioResult{Name: "replay", Requests: 2500, Seconds: 1, Outcomes: map[string]int64{"replay": 2500},
		DB:        dbCounts{Statements: map[string]int64{"select": 2500}, AutocommitReads: 2500},
		PGCommits: 2500, PGSettled: true, XIDs: 3, ForeignXIDs: 3, WALBytes: 10,
		latencies: []time.Duration{time.Millisecond}}
	r := &report{Scenarios: []scenarioResult{base, atomic, replay}, Load: loadConfig{Conns: 16, Rounds: 1, Duration: "1s", Warmup: "0s"}}
	for i := range r.Scenarios {
		r.Scenarios[i].compute()
	}
	r.finish()
	return r
}

func TestTargets(t *testing.T) {
	got := map[string]string{}
	for _, tg := range sample().Targets {
		got[tg.Name] = tg.Status
	}
	want := map[string]string{
		"atomic first execution at 0.58x the baseline's req/s or better":                    "met",          // 0.9x
		"replay with the Redis filter at Fiber's replay or better":                          "not measured", // neither ran
		"replay at 0.9x read-by-id's req/s or better":                                       "not measured", // no read-by-id
		"atomic first execution makes at most 2 protocol round trips besides the handler's": "met",          // 3 less the baseline's 1
		"replay, 409 and 422 make no commit that writes":                                    "not measured", // no 409, 422
		"atomic first execution makes one commit":                                           "met",
	}
	for name, status := range want {
		if got[name] != status {
			t.Errorf("%s: %s, want %s", name, got[name], status)
		}
	}
}

// The async targets compare async-accept with atomic-first, and count the
// accept's round trips with River's insert notifications aside.
func TestAsyncTargets(t *testing.T) {
	r := sample()
	if got := asyncTargets(r); len(got) != 3 || got[0].Status != "not measured" || got[1].Status != "not measured" || got[2].Status != "not measured" {
		t.Fatalf("without the async scenarios: %+v", got)
	}
	// 900 accepts in 1 s: 3 round trips each, and 5 notifications.
	accept := scenarioResult{Name: "async-accept", Requests: 900, Seconds: 1, Outcomes: map[string]int64{"accepted": 900},
		DB:        dbCounts{Statements: map[string]int64{"select": 900, "begin": 900, "with": 1805, "commit": 900}, Commits: 900, AutocommitReads: 900, RoundTrips: 2705},
		latencies: []time.Duration{3 * time.Millisecond}}
	status := scenarioResult{Name: "async-status", Requests: 2000, Seconds: 1, Outcomes: map[string]int64{"read": 500, "pending": 1500},
		DB:        dbCounts{Statements: map[string]int64{"select": 2000}, AutocommitReads: 2000, RoundTrips: 2000},
		latencies: []time.Duration{time.Millisecond}}
	r.Scenarios = append(r.Scenarios, accept, status)
	for i := range r.Scenarios {
		r.Scenarios[i].compute()
	}
	got := asyncTargets(r)
	// As fast as atomic-first (900 req/s, p50 3 ms), not faster: met.
	for i, want := range []string{"met", "met", "met"} {
		if got[i].Status != want {
			t.Errorf("%s: %s (%s), want %s", got[i].Name, got[i].Status, got[i].Detail, want)
		}
	}
	// A fourth round trip per request, or a second commit, misses.
	r.scenario("async-accept").DB.RoundTrips = 3600
	if got := asyncTargets(r); got[1].Status != "missed" {
		t.Errorf("4 round trips per accept: %+v", got[1])
	}
	r.scenario("async-accept").DB.RoundTrips = 3600
	r.scenario("async-accept").DB.AutocommitWrites = 900
	if got := asyncTargets(r); got[1].Status != "missed" {
		t.Errorf("2 commits per accept: %+v", got[1])
	}
	// Slower than atomic-first misses, and says by how much.
	a := r.scenario("async-accept")
	a.Seconds = 2
	a.compute()
	if got := asyncTargets(r); got[0].Status != "missed" || !strings.Contains(got[0].Detail, "0.50x the req/s (450 vs 900)") {
		t.Errorf("half atomic-first's req/s: %+v", got[0])
	}
	// A status read that writes misses.
	r.scenario("async-status").DB.AutocommitWrites = 1
	if got := asyncTargets(r); got[2].Status != "missed" {
		t.Errorf("a status read that writes: %+v", got[2])
	}
}

func TestReportWrites(t *testing.T) {
	r := sample()
	var text bytes.Buffer
	if err := r.write(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"atomic-first       900    900    0.90",
		"select 1.00, begin 1.00, with 1.00, insert 1.00, update 1.00, commit 1.00",
		"3 transaction IDs not taken by the server's commits",
		"0.00*", // replay's xids, marked: not the run's alone
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := r.write(&js, true); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Scenarios) != 3 || back.Scenarios[1].Ratio != 0.9 {
		t.Errorf("JSON round trip: %v, %+v", err, back.Scenarios)
	}
}

func TestMergeRounds(t *testing.T) {
	r := sample()
	a := r.Scenarios[0]
	a.add(r.Scenarios[0])
	if a.Requests != 2000 || a.Seconds != 2 || a.RPS != 1000 || a.DB.Statements["insert"] != 2000 || a.XIDs != 2000 || len(a.latencies) != 4 {
		t.Errorf("merged %+v", a)
	}
}

// TestShortRun runs the whole load benchmark for a moment against a
// fresh database: the server is built and started, two scenarios run,
// and every count adds up.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	opts, err := parseFlags([]string{"-scenarios", "baseline,replay", "-duration", "300ms", "-warmup", "100ms", "-replay-keys", "20", "-conns", "4", "-gobench=false", "-big-bodies", "2", "-body-mib", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts.adminURL = pgtest.NewDatabase(t)
	opts.jsonOut = true
	var out, prog bytes.Buffer
	// Bounds a hang, not the machine's speed: the run builds orders-api,
	// which takes minutes on a loaded machine with a cold cache.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var rep report
	if err := run(ctx, opts, &out, &prog, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("%v\n%s", err, prog.String())
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	base, replay := rep.scenario("baseline"), rep.scenario("replay")
	if base == nil || replay == nil || base.Requests == 0 || replay.Requests == 0 || base.Errors+replay.Errors != 0 {
		t.Fatalf("scenarios: %+v\n%s", rep.Scenarios, prog.String())
	}
	// The counts are exact: one insert per baseline request, one select
	// per replay, and PostgreSQL agrees.
	if base.DB.Statements["insert"] != base.Requests || base.DB.writingCommits() != base.Requests || base.PGRows != base.Requests {
		t.Errorf("baseline: %d requests, statements %+v, %d rows", base.Requests, base.DB, base.PGRows)
	}
	// pg_stat_database's commits lag by a transaction or two now and then:
	// the server's flush reaches its idle connections, and a backend
	// publishes what it held back later (up to 10 s after going idle), so
	// a commit may land on either side of a reading. The tracer's counts
	// are exact; PostgreSQL's must agree within the pool's connections.
	if replay.DB.Statements["select"] != replay.Requests || replay.DB.writingCommits() != 0 || replay.PGRows != 0 || abs(replay.PGCommits-replay.Requests) > 4 {
		t.Errorf("replay: %d requests, statements %+v, %d rows, %d pg commits", replay.Requests, replay.DB, replay.PGRows, replay.PGCommits)
	}
	// The memory measurement sent its bodies to both endpoints, each
	// answered 201, and read a peak no lower than the idle size.
	m := rep.Memory
	if m == nil || m.Baseline == nil {
		t.Fatalf("memory: %+v", m)
	}
	for _, m := range []*memoryResult{m, m.Baseline} {
		if m.Outcomes["201"] != 2 || m.PeakRSS < m.IdleRSS || m.IdleRSS == 0 {
			t.Errorf("memory of %s: %+v", m.Path, m)
		}
	}
	if m.Path != memoryPath || m.Baseline.Path != memoryBaselinePath {
		t.Errorf("memory measured %s and %s", m.Path, m.Baseline.Path)
	}
}

// TestShortRunHop runs a scenario for a moment with -hop: the servers'
// round trips to PostgreSQL cross the delay proxy, and the report says so.
func TestShortRunHop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	opts, err := parseFlags([]string{"-scenarios", "baseline", "-duration", "300ms", "-warmup", "100ms", "-conns", "4", "-gobench=false", "-big-bodies", "0", "-hop", "500us"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts.adminURL = pgtest.NewDatabase(t)
	opts.jsonOut = true
	var out, prog bytes.Buffer
	// Bounds a hang, not the machine's speed: the run builds orders-api,
	// which takes minutes on a loaded machine with a cold cache.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := run(ctx, opts, &out, &prog, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("%v\n%s", err, prog.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	h := rep.Hop
	// A round trip across the hop costs about twice the delay more than
	// one direct; the proxy's lead, calibrated while the machine's load
	// moves, takes some of that back (a run measured 0.9 ms where 1 ms was
	// asked for), so the check asks for half of it: a hop that is there.
	if h.Mode != "proxy" || h.Delay != "500µs" || h.PGRTTMS-h.PGRTTDirectMS < 0.5 {
		t.Errorf("hop: %+v", h)
	}
	base := rep.scenario("baseline")
	// Each request makes one round trip to PostgreSQL across the hop.
	if base == nil || base.Requests == 0 || base.Errors != 0 || base.P50ms < 0.5 || !base.CPU.HopOK {
		t.Errorf("baseline: %+v\n%s", base, prog.String())
	}
}

func TestRefusal(t *testing.T) {
	stderr := "idemgen: /s/stripe.yaml: the generated code would not compile:\n\tX is declared twice by oapi-codegen (lines 1, 2)\n\tY too\n"
	want := "the generated code would not compile: X is declared twice by oapi-codegen (lines 1, 2)"
	if got := refusal(stderr, "/s/stripe.yaml"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// An atomic first execution with three round trips besides the handler's
// misses the round-trip target, and says by how much.
func TestRoundTripTargetMissed(t *testing.T) {
	r := sample()
	r.Scenarios[1].DB.RoundTrips = 3600 // 4 per request; the baseline's is 1
	for _, tg := range checkTargets(r) {
		if strings.Contains(tg.Name, "round trips") {
			if tg.Status != "missed" || !strings.Contains(tg.Detail, "3.00 round trips besides the handler's 1.00") {
				t.Fatalf("%s: %s (%s), want missed with 3.00", tg.Name, tg.Status, tg.Detail)
			}
			return
		}
	}
	t.Fatal("no round-trip target")
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// The delay proxy of -hop holds each direction the delay, passes a stream
// whole and in order, and passes the end on.
func TestDelayProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo, then close after the client's end
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const delay = 2 * time.Millisecond
	h, err := startHop(ctx, delay, []string{"tcp:" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	c, err := net.Dial("tcp", h.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4)
	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if rtt := time.Since(start); rtt < 2*delay || rtt > 2*delay+50*time.Millisecond {
		t.Errorf("round trip %v across a hop of %v each way", rtt, delay)
	}
	// A stream larger than a chunk, then the end.
	stream := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	go func() {
		_, _ = c.Write(stream)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	back, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(back, stream) {
		t.Errorf("the stream came back with %d of %d bytes, %v", len(back), len(stream), err)
	}
}

func TestViaHop(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@127.0.0.1:5432/db?sslmode=disable&pool_max_conns=8": "postgres://u@127.0.0.1:4000/db?pool_max_conns=8&sslmode=disable",
		"host=/var/run/postgresql dbname=db":                              "host=/var/run/postgresql dbname=db host=127.0.0.1 port=4000",
	} {
		if got, err := viaHop(in, "127.0.0.1:4000"); err != nil || got != want {
			t.Errorf("viaHop(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"postgres://u@db.example:6432/x": "tcp:db.example:6432",
		"host=/tmp port=5433 dbname=x":   "unix:/tmp/.s.PGSQL.5433",
	} {
		if got, err := pgTarget(in); err != nil || got != want {
			t.Errorf("pgTarget(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
